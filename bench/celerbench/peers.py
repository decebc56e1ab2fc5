"""The servers a scenario can start: Celer's binaries (built with cargo), the
Rust peers of bench/peers/hyper, the Go peer, and nginx and h2o from Debian
packages with the config templates of bench/peers/. A peer builds or installs
itself, gives the command that serves on a port (the driver pins it to CPU 0)
and names its version for the record."""

import json
import os
import re
import shutil
import subprocess


def sh(argv, **kw):
    """Output of ARGV (stdout and stderr), stripped; empty on failure."""
    try:
        r = subprocess.run(argv, capture_output=True, text=True, **kw)
    except OSError:
        return ""
    return (r.stdout + r.stderr).strip()


def apt_install(run, *pkgs):
    """Installs Debian packages (as root or through sudo)."""
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    run.log(f"installing {' '.join(pkgs)} from Debian packages")
    subprocess.run(sudo + ["apt-get", "update", "-qq"], check=True)
    subprocess.run(sudo + ["apt-get", "install", "-y", "-qq", *pkgs], check=True,
                   env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"}, stdout=subprocess.DEVNULL)


def tool(name, *fallbacks):
    """The path of a program, or None."""
    found = shutil.which(name)
    return found or next((f for f in fallbacks if os.access(f, os.X_OK)), None)


def cargo_build(run, cwd, package, target):
    """Builds PACKAGE in release from CWD and returns the executable of
    TARGET (from cargo's JSON messages), or None if it did not build."""
    run.log(f"building {package} (release)")
    p = subprocess.run(["cargo", "build", "--release", "-p", package, "--message-format=json-render-diagnostics"],
                       cwd=cwd, stdout=subprocess.PIPE, text=True)
    exe = None
    for line in p.stdout.splitlines():
        try:
            m = json.loads(line)
        except ValueError:
            continue
        if m.get("reason") == "compiler-artifact" and m.get("target", {}).get("name") == target:
            exe = m.get("executable") or exe
    return exe if p.returncode == 0 else None


def commit(run):
    c = sh(["git", "-C", run.root, "rev-parse", "--short", "HEAD"]) or "unknown"
    if subprocess.run(["git", "-C", run.root, "diff", "--quiet", "HEAD", "--", "crates", "examples"]).returncode:
        c += " (crates/ or examples/ modified)"
    return c


class Celer:
    """A binary of this repository: an example (built from examples/) or the
    `celer` CLI. ENV names the variable that runs a given binary instead
    (also `--celer-bin` for the server labelled celer)."""

    def __init__(self, package, target, env, args, what="", cwd="examples"):
        self.package, self.target, self.env, self.args, self.what, self.cwd = package, target, env, args, what, cwd
        self.exe, self.given = None, False

    def prepare(self, run, label):
        given = (run.opts.celer_bin if label == "celer" else None) or os.environ.get(self.env)
        if given:
            if not os.access(given, os.X_OK):
                run.die(f"{given} (for {label}) is not an executable")
            self.exe, self.given = given, True
        else:
            self.exe = cargo_build(run, os.path.join(run.root, self.cwd), self.package, self.target)
        return self.exe is not None

    def argv(self, run, variant, port, _dir):
        return [self.exe, *self.args(run, variant, port)]

    def version(self, run):
        if self.given:
            return f"{self.exe} (given{' as ' + self.env if os.environ.get(self.env) else ''})"
        return f"{self.target} at commit {commit(run)}, {sh(['rustc', '--version'])}{self.what}"


def listen(port):
    return ["--listen", f"tcp://127.0.0.1:{port}"]


class RustPeer:
    """A server of bench/peers/hyper (its own cargo project): peer-hyper or
    peer-h2-raw."""

    DIR = "peers/hyper"

    def __init__(self, exe, args=()):
        self.exe, self.args = exe, list(args)

    def prepare(self, run, _label):
        d = os.path.join(run.bench, self.DIR)
        run.log(f"building bench/{self.DIR} (release)")
        ok = subprocess.run(["cargo", "build", "--release", "--quiet", "--manifest-path", f"{d}/Cargo.toml",
                             "--target-dir", f"{d}/target"]).returncode == 0
        self.path = f"{d}/target/release/{self.exe}"
        return ok

    def argv(self, run, variant, port, _dir):
        return [self.path, *listen(port), *self.args]

    def version(self, run):
        lock = open(os.path.join(run.bench, self.DIR, "Cargo.lock")).read()
        v = dict(re.findall(r'name = "([^"]+)"\nversion = "([^"]+)"', lock))
        return (f"bench/{self.DIR} {self.exe}{' ' + ' '.join(self.args) if self.args else ''}: hyper {v.get('hyper')}, "
                f"hyper-util {v.get('hyper-util')}, h2 {v.get('h2')}, tokio {v.get('tokio')} (current-thread runtime)")


class GoPeer:
    """bench/peers/go: Go's net/http, built with `go build` (no external
    modules); HTTPS with session tickets off."""

    def prepare(self, run, _label):
        self.go = tool("go", "/usr/local/go/bin/go")
        if not self.go:
            run.die("go not found (install Go, or leave go out with --only)")
        self.path = os.path.join(run.work, "peer-go")
        run.log("building the Go peer")
        return subprocess.run([self.go, "build", "-o", self.path, "."], cwd=os.path.join(run.bench, "peers/go"),
                              env={**os.environ, "GOFLAGS": "-mod=mod"}).returncode == 0

    def argv(self, run, variant, port, _dir):
        return [self.path, "-listen", f"127.0.0.1:{port}", "-cert", run.cert, "-key", run.key, "-no-resumption"]

    def version(self, run):
        return f"{sh([self.go, 'version']).split()[2]} net/http (bench/peers/go)"


class Templated:
    """A server configured by a template of bench/peers/<dir>/ whose @NAME@
    placeholders the driver fills in (PORT, DIR, NOFILE, CERT, KEY, ROOT,
    and what the scenario adds). TEMPLATE maps the variant to a file name."""

    def __init__(self, template):
        self.template = template if callable(template) else (lambda _v: template)

    def config(self, run, variant, port, dir_):
        text = open(os.path.join(run.bench, "peers", self.dir, self.template(variant))).read()
        subst = {"PORT": port, "DIR": dir_, "NOFILE": run.nofile, "CERT": run.cert, "KEY": run.key, **run.subst}
        text = re.sub(r"@([A-Z]+)@", lambda m: str(subst[m.group(1)]), text)
        path = os.path.join(dir_, f"{self.dir}.conf")
        with open(path, "w") as f:
            f.write(text)
        return path


class Nginx(Templated):
    """nginx, one worker: master and worker both on CPU 0 (the worker
    inherits the master's CPU list)."""

    dir = "nginx"

    def prepare(self, run, _label):
        self.path = tool("nginx", "/usr/sbin/nginx")
        if not self.path:
            apt_install(run, "nginx")
            self.path = tool("nginx", "/usr/sbin/nginx")
        return bool(self.path)

    def argv(self, run, variant, port, dir_):
        return [self.path, "-p", dir_, "-c", self.config(run, variant, port, dir_), "-e", f"{dir_}/error.log"]

    def version(self, run):
        return f"{sh([self.path, '-v']).replace('nginx version: ', '')} (Debian package, bench/peers/nginx/)"


class H2o(Templated):
    """h2o, one thread; it serves the two endpoints as files of its
    directory (it has no `return`), and writes its pid file as nobody."""

    dir = "h2o"

    def prepare(self, run, _label):
        self.path = tool("h2o")
        if not self.path:
            apt_install(run, "h2o")
            self.path = tool("h2o")
        return bool(self.path)

    def argv(self, run, variant, port, dir_):
        os.chmod(dir_, 0o777)
        for name, body in (("plaintext.txt", "Hello, World!"), ("message.json", '{"message":"Hello, World!"}')):
            with open(os.path.join(dir_, name), "w") as f:
                f.write(body)
            os.chmod(os.path.join(dir_, name), 0o644)
        return [self.path, "-c", self.config(run, variant, port, dir_)]

    def version(self, run):
        return f"{sh([self.path, '--version']).splitlines()[0].replace('h2o version ', '')} (Debian package, bench/peers/h2o/)"


class WsRustPeer:
    """A server of bench/peers/ws-rust (its own cargo project), one thread:
    peer-tungstenite-echo (echo and /broadcast) or peer-fastwebsockets-echo
    (echo only)."""

    DIR = "peers/ws-rust"

    def __init__(self, exe):
        self.exe = exe

    def prepare(self, run, _label):
        d = os.path.join(run.bench, self.DIR)
        run.log(f"building bench/{self.DIR} (release)")
        ok = subprocess.run(["cargo", "build", "--release", "--quiet", "--manifest-path", f"{d}/Cargo.toml",
                             "--target-dir", f"{d}/target"]).returncode == 0
        self.path = f"{d}/target/release/{self.exe}"
        return ok

    def argv(self, run, variant, port, _dir):
        return [self.path, str(port)]

    def version(self, run):
        lock = open(os.path.join(run.bench, self.DIR, "Cargo.lock")).read()
        v = dict(re.findall(r'name = "([^"]+)"\nversion = "([^"]+)"', lock))
        lib = (f"fastwebsockets {v.get('fastwebsockets')}, hyper {v.get('hyper')}" if "fastwebsockets" in self.exe
               else f"tokio-tungstenite {v.get('tokio-tungstenite')}, tungstenite {v.get('tungstenite')}")
        return (f"bench/{self.DIR} {self.exe}: {lib}, tokio {v.get('tokio')} (current-thread runtime; no "
                "permessage-deflate)")


class WsFloor:
    """bench/peers/ws-floor (its own cargo project): the floor, a WebSocket
    server with the least user-space work the echo and fan-out loads allow
    (one thread, raw epoll, one `send` per readable batch, a broadcast frame
    built once and sent in a plain loop); docs/decisions/069."""

    DIR = "peers/ws-floor"

    def prepare(self, run, _label):
        d = os.path.join(run.bench, self.DIR)
        run.log(f"building bench/{self.DIR} (release)")
        ok = subprocess.run(["cargo", "build", "--release", "--quiet", "--manifest-path", f"{d}/Cargo.toml",
                             "--target-dir", f"{d}/target"]).returncode == 0
        self.path = f"{d}/target/release/peer-ws-floor"
        return ok

    def argv(self, run, variant, port, _dir):
        return [self.path, str(port)]

    def version(self, run):
        lock = open(os.path.join(run.bench, self.DIR, "Cargo.lock")).read()
        v = dict(re.findall(r'name = "([^"]+)"\nversion = "([^"]+)"', lock))
        return (f"bench/{self.DIR} peer-ws-floor: libc {v.get('libc')}, sha1_smol {v.get('sha1_smol')}, base64 "
                f"{v.get('base64')} (one thread, edge-triggered epoll; no fragmentation, extensions or UTF-8 check)")


class GoWs:
    """bench/peers/ws-go: gorilla/websocket (from the Go module proxy),
    GOMAXPROCS=1, permessage-deflate off (its default)."""

    def prepare(self, run, _label):
        self.go = tool("go", "/usr/local/go/bin/go")
        if not self.go:
            run.log("go not found: gorilla left out")
            return False
        self.path = os.path.join(run.work, "peer-ws-go")
        run.log("building the Go WebSocket peer")
        return subprocess.run([self.go, "build", "-o", self.path, "."],
                              cwd=os.path.join(run.bench, "peers/ws-go")).returncode == 0

    def argv(self, run, variant, port, _dir):
        return [self.path, "-listen", f"127.0.0.1:{port}"]

    def version(self, run):
        mod = open(os.path.join(run.bench, "peers/ws-go/go.mod")).read()
        v = re.search(r"gorilla/websocket (\S+)", mod)
        return (f"{sh([self.go, 'version']).split()[2]}, gorilla/websocket {v.group(1) if v else '?'} "
                "(bench/peers/ws-go, GOMAXPROCS=1, no permessage-deflate)")


class NodeWs:
    """bench/peers/ws-node: Node's `ws` (npm), one process, permessage-deflate
    on; `npm install` when node_modules is missing."""

    def prepare(self, run, _label):
        self.node, npm = tool("node"), tool("npm")
        self.dir = os.path.join(run.bench, "peers/ws-node")
        if not self.node:
            run.log("node not found: Node ws left out")
            return False
        if not os.path.exists(f"{self.dir}/node_modules/ws/package.json"):
            if not npm:
                run.log("npm not found: Node ws left out")
                return False
            run.log("installing ws with npm")
            if subprocess.run([npm, "install", "--no-audit", "--no-fund"], cwd=self.dir).returncode:
                return False
        return True

    def __init__(self, context_takeover=True):
        self.context_takeover = context_takeover

    def argv(self, run, variant, port, _dir):
        return [self.node, f"{self.dir}/server.js", str(port), *([] if self.context_takeover else ["no-context-takeover"])]

    def version(self, run):
        ws = json.load(open(f"{self.dir}/node_modules/ws/package.json"))["version"]
        how = "context takeover on" if self.context_takeover else "server_no_context_takeover"
        return f"Node {sh([self.node, '--version'])}, ws {ws} (bench/peers/ws-node, permessage-deflate on, {how})"
