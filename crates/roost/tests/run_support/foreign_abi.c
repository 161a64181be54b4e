/* foreign_abi: makes an i386 system call (getpid through int 0x80) twice from this 64-bit
 * program and prints how each ended: "pid" natively, "ENOSYS" where roost refuses calls of
 * another ABI (their numbers are not the x86-64 table's). */
#include <stdio.h>

int main(void) {
    for (int i = 0; i < 2; i++) {
        long ret;
        __asm__ volatile("int $0x80" : "=a"(ret) : "a"(20L) : "memory");
        printf("%s\n", ret > 0 ? "pid" : ret == -38 ? "ENOSYS" : "other");
    }
    return 0;
}
