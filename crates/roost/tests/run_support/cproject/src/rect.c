#include "shapes.h"
double area_rect(double w, double h) { return w * h; }
