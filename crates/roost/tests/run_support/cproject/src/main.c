#include <stdio.h>
#include "shapes.h"
int main(void) {
    printf("circle %.3f rect %.1f sum %u\n", area_circle(2), area_rect(3, 4), checksum("roost"));
    return 0;
}
