#include "shapes.h"
double area_circle(double r) { return 3.14159265358979 * r * r; }
