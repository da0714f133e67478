"""Drives `jrpc connect` through a pseudo-terminal, as a user would type:
tab completion, Ctrl-R, results, :help, the server's own messages and an
answer to its request, Ctrl-D. Usage: drive_pty.py JRPC CHATTY_SERVER HOME.
Exits 0 when every step saw what it expected; else prints the transcript."""
import os
import pty
import select
import sys
import time

jrpc, chatty, home = sys.argv[1], sys.argv[2], sys.argv[3]


class Session:
    def __init__(self, argv):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.environ["HOME"] = home
            os.environ.pop("XDG_STATE_HOME", None)
            os.environ["TERM"] = "xterm"
            os.execv(argv[0], argv)
        self.seen = b""
        self.pos = 0

    def expect(self, text, timeout=20):
        """Waits for `text` after what the last expect matched."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            at = self.seen.find(text.encode(), self.pos)
            if at >= 0:
                self.pos = at + len(text)
                return
            ready, _, _ = select.select([self.fd], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(self.fd, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                self.seen += chunk
        fail(f"did not see {text!r}", self)

    def type(self, keys):
        for key in keys:
            os.write(self.fd, key.encode())
            time.sleep(0.02)

    def end(self):
        self.type("\x04")  # Ctrl-D
        return self.wait_exit()

    def wait_exit(self):
        deadline = time.time() + 20
        while time.time() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return os.waitstatus_to_exitcode(status)
            try:
                ready, _, _ = select.select([self.fd], [], [], 0.1)
                if ready:
                    self.seen += os.read(self.fd, 4096)
            except OSError:
                time.sleep(0.1)
        fail("did not exit after Ctrl-D", self)


def fail(why, session):
    print(why)
    print(session.seen.decode(errors="replace"))
    sys.exit(1)


# A server with rpc.discover: completion, results, history, Ctrl-R.
s = Session([jrpc, "connect", "--", jrpc, "serve", "--stdio"])
s.expect("Tab completes them")
s.expect("jrpc> ")
s.type("subtr\t")
s.expect("subtract")
s.type(" 42 23\r")
s.expect("19")
s.type("sum 1 2 3\r")
s.expect("6")
s.type(":help\r")
s.expect(":notify METHOD")
s.type("\x12subtr")  # Ctrl-R, search back
s.expect("subtract 42 23")
s.type("\r")
s.expect("#3 subtract")
s.type("nope\r")
s.expect("-32601")
code = s.end()
if code != 0:
    fail(f"exit status {code}", s)
history = os.path.join(home, ".local", "state", "jrpc", "connect_history")
if "sum 1 2 3" not in open(history).read():
    fail("the history file lacks the lines typed", s)

# A server that sends its own notification and request, answered by hand.
s = Session([jrpc, "connect", "--", "python3", chatty])
s.expect("jrpc> ")
s.type("progress\r")
s.expect("<- notification \"progress\"")
s.expect("done")
s.type("ask\r")
s.expect(":reply \"server-1\" JSON")
s.type(':reply "server-1" "tester"\r')
s.expect("client said")
s.expect("tester")
s.type(":quit\r")
code = s.wait_exit()
if code != 0:
    fail(f"exit status {code} after :quit", s)
print("ok")
