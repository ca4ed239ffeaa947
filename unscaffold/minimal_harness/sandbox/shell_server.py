"""Runs inside the bubblewrap sandbox for the whole trial: one fresh `bash -c` per request.

Namespaces are built once per trial instead of once per command (bubblewrap's start-up dominates a
step otherwise), and this server imports only what a bare `python -I -S` has, since it starts once per
trial and many trials start at once. Protocol on stdin/stdout, length-prefixed (no JSON to import):
request `TIMEOUT NBYTES\\n` + command; answer `EXIT TIMED_OUT ELIDED DURATION NBYTES\\n` + output.
After every command, everything else in the pid namespace is killed, so nothing a command started
outlives it (the host, as root, also ends them through the sandbox's cgroup, which no fork outruns).
A command can see and signal this server (same user); if it kills it, the host side starts a new one
and reports what happened.

As root, bubblewrap starts this server (or `setpriv`, which does the same faster) with only the
capabilities to change user. It becomes the sandbox's uid, then runs itself again under a second,
unprivileged bubblewrap that gives it a user namespace of its own in which no further user namespace
can be made (`--disable-userns`); only then does it say READY and serve. Without root, each command
gets a pid namespace of its own instead (the host has no cgroup to end them by)."""

from __future__ import annotations

import os
import sys
import time

DEVNULL = "/dev/null"
# Python ignores SIGPIPE and SIGXFSZ; a command must get the defaults back, as subprocess gives them
# (numbers, Linux: the `signal` module is an import this server skips).
RESTORED_SIGNALS = (13, 25)
READY = b"READY\n"  # the first line out: the server is serving, and no command has run yet
INNER = "inner"  # the uid argument of the server restarted inside the unprivileged bubblewrap


def in_private_pid_namespace() -> bool:
    """Bubblewrap's init is pid 1 and this server one of the first pids; on a host that never holds."""
    return os.getpid() <= 8 and os.getppid() in (1, 2)


def kill_others() -> None:
    me, parent = os.getpid(), os.getppid()  # the parent: bubblewrap's init, or the inner bubblewrap
    for _ in range(3):  # a fork bomb may respawn between passes
        victims = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, me, parent)]
        if not victims:
            return
        for pid in victims:
            try:
                os.kill(pid, 9)
            except (ProcessLookupError, PermissionError):
                pass


def command_namespace_argv(bwrap: str) -> list[str]:
    """Without root (no cgroup), each command runs in a pid namespace of its own: when its first process
    ends, the kernel ends every other in it, so no fork outruns the kill. The namespace comes with a user
    namespace in which no further one can be made."""
    return [bwrap, "--unshare-user", "--disable-userns", "--unshare-pid", "--cap-drop", "ALL", "--dev-bind", "/", "/",
            "--proc", "/proc", "--die-with-parent", "--"]


def resolve(name: str) -> str:
    """`name` as the absolute path PATH finds it at, looked up once per trial rather than by every spawn
    (each folder before the right one costs a failed exec); `name` itself if PATH has none."""
    if "/" in name:
        return name
    for folder in os.environ.get("PATH", "").split(":"):
        path = os.path.join(folder or ".", name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return name


def run_command(command: str, timeout_s: float, wrap: list[str] | None = None,
                program: str | None = None):  # -> ExecResult (lazy import)
    """`bash -c command` (behind `wrap`); `program`: the first word's absolute path, from `resolve`."""
    from unscaffold.minimal_harness.sandbox.stream import watch

    start = time.monotonic()
    read_end, write_end = os.pipe()
    null = os.open(DEVNULL, os.O_RDONLY)
    actions = [(os.POSIX_SPAWN_DUP2, null, 0), (os.POSIX_SPAWN_DUP2, write_end, 1),
               (os.POSIX_SPAWN_DUP2, write_end, 2)]
    try:
        argv = [*(wrap or []), "bash", "-c", command]
        spawn = os.posix_spawn if program and program.startswith("/") else os.posix_spawnp
        pid = spawn(program or argv[0], argv, os.environ, file_actions=actions, setsid=True,
                    setsigdef=RESTORED_SIGNALS)
    finally:
        os.close(write_end)
        os.close(null)

    def poll_exit() -> int | None:
        done, status = os.waitpid(pid, os.WNOHANG)
        return None if done == 0 else os.waitstatus_to_exitcode(status)

    try:
        result = watch(pid, read_end, poll_exit, start=start, timeout_s=timeout_s)
    finally:
        os.close(read_end)
    try:  # reap it if the deadline, not its exit, ended the watch (it was killed)
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
    return result


def capabilities(field: str = "CapEff") -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1], 16)
    return -1


def become(uid: int) -> None:
    """Become `uid` with no groups (and with it no capabilities left to use)."""
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)


def inner_argv(bwrap: str, python: str, script: str, root: str, cwd: str) -> list[str]:
    """This server again, under an unprivileged bubblewrap: the same view of the files, a user namespace
    of its own with no capabilities and no room for another."""
    return [bwrap, "--unshare-user", "--disable-userns", "--cap-drop", "ALL", "--dev-bind", "/", "/",
            "--die-with-parent", "--", python, "-I", "-S", script, root, cwd, INNER]


def check_unprivileged() -> None:
    """Refuse to serve if any capability survived, in the effective or the inheritable set."""
    if capabilities("CapEff") != 0 or capabilities("CapInh") != 0:
        sys.stderr.write("shell_server: refusing to serve with capabilities left\n")
        raise SystemExit(3)


def serve(cwd: str, wrap: list[str] | None = None) -> None:
    if not in_private_pid_namespace():
        # kill_others() would kill every process of this user on a host: refuse outright.
        sys.stderr.write("shell_server: refusing to run outside a private pid namespace\n")
        raise SystemExit(3)
    check_unprivileged()
    os.chdir(cwd)
    program = resolve((wrap or ["bash"])[0])  # the runtime folders are read-only: it stays where it is
    requests, answers = sys.stdin.buffer, sys.stdout.buffer
    answers.write(READY)
    answers.flush()
    while header := requests.readline():
        timeout, size = header.split()
        command = requests.read(int(size)).decode("utf-8", errors="replace")
        result = run_command(command, float(timeout), wrap, program)
        kill_others()
        data = result.output.encode("utf-8", errors="replace")
        answers.write(f"{result.exit_code} {int(result.timed_out)} {result.elided_chars} {result.duration_s:.6f} "
                      f"{len(data)}\n".encode() + data)
        answers.flush()


if __name__ == "__main__":
    # Started as a script with `python -I -S` (no site-packages); argv: the folder holding this server's
    # own copy of its modules, the working directory, the uid to become (-1: stay, already in a user
    # namespace; `inner`: restarted by the inner bubblewrap), and the bubblewrap to use (with -1: each
    # command then gets a pid namespace of its own).
    sys.path.insert(0, sys.argv[1])
    who = sys.argv[3] if len(sys.argv) > 3 else "-1"
    if who not in (INNER, "-1"):
        if not in_private_pid_namespace():
            sys.stderr.write("shell_server: refusing to run outside a private pid namespace\n")
            raise SystemExit(3)
        become(int(who))
        argv = inner_argv(sys.argv[4], sys.executable, os.path.abspath(__file__), sys.argv[1], sys.argv[2])
        os.execv(argv[0], argv)
    serve(sys.argv[2], command_namespace_argv(sys.argv[4]) if who == "-1" and len(sys.argv) > 4 else None)
