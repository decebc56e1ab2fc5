#!/usr/bin/env python3
"""Inclusive ("children") share of the sampled CPU under the kernel functions
that split a profile into TCP work (paid whatever the submission interface)
and the interface around it. Input: `perf report --children --sort sym
--stdio -g none` of a `perf record -g` on the sender/server process."""
import re
import sys

# function -> what its inclusive time stands for
KEYS = [
    ("tcp_sendmsg", "TCP send, incl. loopback xmit, the receiver's TCP input and its wake-up"),
    ("tcp_recvmsg", "TCP receive (copy to user, ACK/window work)"),
    ("sock_sendmsg", "socket send layer (LSM hook + tcp_sendmsg)"),
    ("__sys_sendto", "sendto(2) below the syscall entry"),
    ("__sys_recvfrom", "recvfrom(2) below the syscall entry"),
    ("do_epoll_wait", "epoll_wait(2)"),
    ("__do_sys_io_uring_enter", "io_uring_enter(2)"),
    ("io_submit_sqes", "io_uring SQE submission"),
    ("io_issue_sqe", "io_uring issue (incl. the op)"),
    ("io_send", "io_uring send op (incl. sock_sendmsg)"),
    ("io_recv", "io_uring recv op"),
    ("io_sq_thread", "SQPOLL kernel thread"),
    ("entry_SYSCALL_64", "everything entered through a syscall"),
    ("do_syscall_64", "syscall dispatch and below"),
]

def main(path):
    rows = {}
    for line in open(path):
        m = re.match(r"\s*([\d.]+)%\s+([\d.]+)%\s+\[([k.])\]\s+(\S+)", line)
        if m:
            rows[m.group(4)] = (float(m.group(1)), float(m.group(2)), m.group(3))
    user_self = 0.0
    for line in open(path):
        m = re.match(r"\s*([\d.]+)%\s+([\d.]+)%\s+\[\.\]\s+(\S+)", line)
        if m:
            user_self += float(m.group(2))
    print(f"{'function':<26} {'incl %':>7}  meaning")
    for k, meaning in KEYS:
        if k in rows:
            print(f"{k:<26} {rows[k][0]:>7.1f}  {meaning}")
    print(f"{'(user space, self)':<26} {user_self:>7.1f}  the process's own code")

if __name__ == "__main__":
    main(sys.argv[1])
