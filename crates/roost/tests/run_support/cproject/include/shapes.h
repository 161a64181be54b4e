/* shapes: a tiny library for the make+gcc integration test. */
#ifndef SHAPES_H
#define SHAPES_H
double area_circle(double r);
double area_rect(double w, double h);
unsigned checksum(const char *s);
#endif
