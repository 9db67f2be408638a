"""A seccomp filter that stops the sandbox from creating user namespaces.

Inside a new user namespace a process is root with every capability over the namespaces it then
creates: it could mount, chroot or build raw sockets in its own network namespace, and a fork bomb
under a mapped uid could dodge RLIMIT_NPROC. `--disable-userns` would do this, but bwrap allows it
only with `--unshare-user`, which the root path cannot use (RLIMIT_NPROC is ignored for uid 0), so
the filter is built here: a classic BPF program, as bwrap's `--seccomp FD` expects.

It answers EPERM to `unshare` and `clone` whose flags hold CLONE_NEWUSER, and ENOSYS to `clone3`
(its flags live in memory the filter cannot read; libc then falls back to `clone`). The compat ABIs
(i386 on x86_64, arm on aarch64) are filtered with their own syscall numbers, and x32 is refused.
"""

from __future__ import annotations

import os
import platform
import struct
from functools import cache

from coevo.errors import SandboxUnavailableError

# struct seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6] (little-endian hosts).
NR, ARCH, ARG0_LOW = 0, 4, 16
LD_ABS, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06
ALLOW, ERRNO = 0x7FFF0000, 0x00050000
EPERM, ENOSYS = 1, 38
CLONE_NEWUSER = 0x10000000
X32_BIT = 0x40000000
AUDIT_ARCH_X86_64, AUDIT_ARCH_I386 = 0xC000003E, 0x40000003
AUDIT_ARCH_AARCH64, AUDIT_ARCH_ARM = 0xC00000B7, 0x40000028
# arch -> (clone, unshare, clone3) syscall numbers
SYSCALLS = {
    AUDIT_ARCH_X86_64: (56, 272, 435),
    AUDIT_ARCH_I386: (120, 310, 435),
    AUDIT_ARCH_AARCH64: (220, 97, 435),
    AUDIT_ARCH_ARM: (120, 337, 435),
}
HOSTS = {"x86_64": (AUDIT_ARCH_X86_64, AUDIT_ARCH_I386), "aarch64": (AUDIT_ARCH_AARCH64, AUDIT_ARCH_ARM)}


@cache
def program() -> bytes:
    """The filter as an array of `struct sock_filter` for this host's architectures."""
    machine = platform.machine()
    if machine not in HOSTS:
        raise SandboxUnavailableError(
            f"the local sandbox's seccomp filter knows x86_64 and aarch64, not {machine}; "
            "use the docker backend on this host")
    code: list[list] = []
    labels: dict[str, int] = {}

    def emit(op: int, k: int = 0, jt: int | str = 0, jf: int | str = 0) -> None:
        code.append([op, jt, jf, k])

    emit(LD_ABS, ARCH)
    for arch in HOSTS[machine]:
        clone, unshare, clone3 = SYSCALLS[arch]
        emit(JEQ, arch, 0, f"next-{arch}")
        emit(LD_ABS, NR)
        if arch == AUDIT_ARCH_X86_64:
            emit(JGE, X32_BIT, "eperm")
        emit(JEQ, clone3, "enosys")
        emit(JEQ, unshare, "flags")
        emit(JEQ, clone, "flags")
        emit(RET, ALLOW)
        labels[f"next-{arch}"] = len(code)
    emit(RET, ERRNO | EPERM)  # an architecture this host should never report
    labels["flags"] = len(code)
    emit(LD_ABS, ARG0_LOW)
    emit(JSET, CLONE_NEWUSER, "eperm")
    emit(RET, ALLOW)
    labels["eperm"] = len(code)
    emit(RET, ERRNO | EPERM)
    labels["enosys"] = len(code)
    emit(RET, ERRNO | ENOSYS)

    def offset(i: int, target: int | str) -> int:
        return target if isinstance(target, int) else labels[target] - i - 1

    return b"".join(struct.pack("<HBBI", op, offset(i, jt), offset(i, jf), k)
                    for i, (op, jt, jf, k) in enumerate(code))


def program_fd() -> int:
    """A fresh readable fd holding the program; bwrap reads it to the end, so each spawn needs one."""
    fd = os.memfd_create("coevo-seccomp", os.MFD_CLOEXEC)
    os.write(fd, program())
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
