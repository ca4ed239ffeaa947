"""Before the first trial or training step: every resource a command needs answers, or one line says which
does not and what to do (exit 2), within seconds.

Each check looks only as far as it must to know the resource is there: one short request to a model server,
the key of a hosted API, the config of a model or adapter folder (never the weights), the sandbox's program
or daemon, the Ray address's port. `--no-preflight` skips them all (a server that is still starting)."""

from __future__ import annotations

import os
import shutil
import socket
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from pydantic import BaseModel, ConfigDict

from unscaffold.errors import UnscaffoldError

if TYPE_CHECKING:
    from unscaffold.specs import ExecutorSpec, ModelSpec, ReviewerSpec

TIMEOUT_S = 5.0  # one request or connection; a resource slower than this to answer is not there
SKIP_HINT = "pass --no-preflight if it is still starting"
NO_PREFLIGHT_HELP = "Skip the checks that every model, adapter, sandbox and cluster answers before the first trial."
HUB = "huggingface.co"
RAY_CURRENT = Path("/tmp/ray/ray_current_cluster")  # where `ray start` leaves the address `ray:auto` reads


class PreflightError(UnscaffoldError):
    """Resources a command needs are missing: one line each."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\nerror: ".join(problems))


Check = Callable[[], str | None]


def run_checks(checks: Iterable[Check]) -> None:
    """Run every check (each says what is wrong, or None); raise once, naming every missing resource."""
    problems = [p for p in (check() for check in checks) if p]
    if problems:
        raise PreflightError(list(dict.fromkeys(problems)))


# ---- network ---------------------------------------------------------------------------------------------


def _resolve(host: str, port: int, timeout_s: float) -> list[tuple] | None:
    """getaddrinfo with a time-out (it has none of its own: a missing DNS server would block for long)."""
    found: list[list[tuple]] = []

    def lookup() -> None:
        try:
            found.append(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except OSError:
            found.append([])

    thread = threading.Thread(target=lookup, daemon=True)
    thread.start()
    thread.join(timeout_s)
    return found[0] if found else None


def tcp_problem(host: str, port: int, timeout_s: float = TIMEOUT_S) -> str | None:
    """Why nothing answers at host:port (`connection refused`, `no such host`, `timed out`), or None."""
    infos = _resolve(host, port, timeout_s)
    if infos is None:
        return f"looking up {host} timed out"
    if not infos:
        return f"no such host {host}"
    last = "connection refused"
    for family, kind, proto, _, address in infos:
        with socket.socket(family, kind, proto) as s:
            s.settimeout(timeout_s)
            try:
                s.connect(address)
                return None
            except TimeoutError:
                last = f"no answer within {timeout_s:g} s"
            except ConnectionRefusedError:
                last = "connection refused"
            except OSError as e:
                last = e.strerror or type(e).__name__
    return last


def _exchange(connect: Callable[[socket.socket], None], family: int, hello: bytes, timeout_s: float) -> bytes | str:
    """Send `hello` and return the first bytes of the answer, or why there was none. A listening port is not
    enough: a proxy or a stale forward accepts connections that nothing behind it answers."""
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.settimeout(timeout_s)
        try:
            connect(s)
            s.sendall(hello)
            data = s.recv(64)
        except TimeoutError:
            return f"no answer within {timeout_s:g} s"
        except ConnectionRefusedError:
            return "connection refused"
        except OSError as e:
            return e.strerror or type(e).__name__
    return data or "the connection was closed without an answer"


# The HTTP/2 preface and an empty SETTINGS frame: a gRPC server (Ray's GCS, the Ray client server) answers
# with a SETTINGS frame of its own (frame type 4 in the header's fourth byte).
H2_HELLO = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])


def grpc_problem(host: str, port: int, timeout_s: float = TIMEOUT_S) -> str | None:
    """Why no gRPC server answers at host:port, or None."""
    why = tcp_problem(host, port, timeout_s)
    if why:
        return why
    answer = _exchange(lambda s: s.connect((host, port)), socket.AF_INET6 if ":" in host else socket.AF_INET,
                       H2_HELLO, timeout_s)
    if isinstance(answer, str):
        return answer
    return None if len(answer) >= 4 and answer[3] == 4 else "something answers there, but not a gRPC server"


def _host_port(url: str) -> tuple[str, int]:
    parsed = urlparse(url if "://" in url else f"http://{url}")
    default = 443 if parsed.scheme in ("https", "wss") else 80
    return parsed.hostname or "", parsed.port or default


# ---- model specs -----------------------------------------------------------------------------------------


def model_problem(spec: ModelSpec | ReviewerSpec | str, flag: str) -> str | None:
    """A student, reviewer or role spec (typed, or its text) that cannot be reached or loaded; None for the
    built-in ones (oracle, passthrough, rules)."""
    from unscaffold.specs import ModelSpec, ReviewerSpec
    from unscaffold.specs.reviewer import WORDS

    if isinstance(spec, str):
        try:
            spec = ReviewerSpec.parse(spec, flag=flag) if spec in WORDS or spec.startswith("cascade:") else \
                ModelSpec.parse(spec, flag=flag, oracle=True)
        except UnscaffoldError as e:
            return str(e)
    if isinstance(spec, ReviewerSpec):
        return next(filter(None, (model_problem(m, flag) for m in spec.models)), None)
    s, where = spec, f"{flag} {spec}"
    if s.kind == "oracle":
        return None
    if s.kind == "replay":
        return None if Path(s.target).is_file() else f"{where}: no replay file {s.target}"
    if s.kind == "anthropic":
        if os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN"):
            return None
        return f"{where}: ANTHROPIC_API_KEY is not set: export it"
    if s.kind == "openai":
        return openai_problem(s.target, s.base_url or os.environ.get("OPENAI_BASE_URL"), where)
    return hf_problem(s.target, s.adapter, where)


def openai_problem(model: str, base_url: str | None, where: str) -> str | None:
    """A hosted API needs its key; a server of our own (vLLM, SGLang) must answer one request, and serve
    the model when it lists what it serves."""
    key = os.environ.get("OPENAI_API_KEY")
    if not base_url:
        return None if key else f"{where}: OPENAI_API_KEY is not set: export it, or give a server as " \
                                "openai:MODEL@BASE_URL"
    import urllib.error
    import urllib.request

    url = base_url.rstrip("/") + "/models"
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key or 'EMPTY'}"})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:  # noqa: S310 (the user's server)
            status, body = answer.status, answer.read(1_000_000)
    except urllib.error.HTTPError as e:
        status, body = e.code, b""
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        if isinstance(reason, TimeoutError) or "timed out" in str(reason):
            return f"{where}: the server at {base_url} did not answer within {TIMEOUT_S:g} s: start it, or {SKIP_HINT}"
        host, port = _host_port(base_url)
        why = tcp_problem(host, port) or str(reason)
        return f"{where}: no server answers at {base_url} ({why}): start it, or {SKIP_HINT}"
    if status in (401, 403):
        return f"{where}: the server at {base_url} refused the key (HTTP {status}): set OPENAI_API_KEY"
    if status != 200:
        return None  # a server without the listing still serves completions
    try:
        served = [m.id for m in ModelList.model_validate_json(body).data]
    except ValueError:  # not the OpenAI listing: the server still serves completions
        return None
    if served and model not in served:
        return f"{where}: the server at {base_url} serves {', '.join(served[:5])}, not {model}"
    return None


def hf_problem(path: str, adapter: str | None, where: str) -> str | None:
    """The base model (and the adapter, if any) has a config that loads, without reading any weights."""
    return model_path_problem(path, where) or (adapter_problem(adapter, where) if adapter else None)


def model_path_problem(path: str, where: str) -> str | None:
    """A built-in tiny model (`tiny[:TEMPLATE]`, ...), a local checkpoint folder, or a hub id that is cached or
    can be fetched now."""
    from unscaffold.errors import InputError
    from unscaffold.llm import smollm
    from unscaffold.offline.tiny import available_templates
    from unscaffold.specs import WeightsSpec

    weights = WeightsSpec.parse(path, flag=where)
    if weights.kind == "smollm":
        try:
            smollm.gguf_file()
        except InputError as e:
            return f"{where}: {e}"
        return None
    if weights.kind == "tiny":
        template = weights.template
        known = available_templates()
        if template and template not in known:
            shown = ", ".join(t for t in known if t.startswith("qwen") and not t.endswith("_training"))
            return f"{where}: TRL has no chat template {template!r} for the tiny model; e.g. {shown}"
        return None
    folder = Path(path).expanduser()
    if folder.is_dir():
        if not (folder / "config.json").is_file():
            return f"{where}: {folder} has no config.json: give a checkpoint folder (or `tiny`)"
        return config_problem(str(folder), where)
    if not looks_like_hub_id(path):
        return f"{where}: no model folder {path}: give a checkpoint folder, a Hugging Face id, or `tiny`"
    return hub_problem(path, where)


def looks_like_hub_id(name: str) -> bool:
    """`org/name`, not a path: what `from_pretrained` would look up on the Hugging Face hub."""
    return not name.startswith((".", "/", "~")) and name.count("/") == 1


def vllm_problem(use_vllm: bool) -> str | None:
    """`--use-vllm` needs vLLM importable here (it is in no default install: a GPU machine's extra)."""
    import importlib.util

    if not use_vllm or importlib.util.find_spec("vllm") is not None:
        return None
    return ("--use-vllm: vLLM is not installed: `pip install 'unscaffold[vllm]'` on a machine with a GPU, or "
            "leave --use-vllm out (rollouts then generate with transformers)")


def config_problem(name: str, where: str, offline: bool = True) -> str | None:
    try:
        from transformers import AutoConfig

        AutoConfig.from_pretrained(name, local_files_only=offline)
    except (OSError, ValueError, KeyError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return f"{where}: the config of {name} does not load: {first[:300]}"
    return None


def hub_problem(repo: str, where: str) -> str | None:
    """A hub id loads from the local cache; failing that it must be fetchable now, or the load would spend
    long minutes retrying a hub it cannot reach."""
    from huggingface_hub import try_to_load_from_cache

    cached = try_to_load_from_cache(repo, "config.json")
    if isinstance(cached, str):
        return config_problem(cached.rsplit("/", 1)[0], where)
    advice = f"download it where there is network (`hf download {repo}`) and pass its folder"
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return f"{where}: {repo} is not in the Hugging Face cache and HF_HUB_OFFLINE is set: {advice}"
    host, port = _host_port(os.environ.get("HF_ENDPOINT") or f"https://{HUB}")
    why = tcp_problem(host, port)
    if why:
        return f"{where}: {repo} is not a folder here nor in the Hugging Face cache, and {host} cannot be " \
               f"reached ({why}): {advice}"
    return None


def adapter_problem(adapter: str, where: str) -> str | None:
    """A PEFT adapter folder: `adapter_config.json` there and readable (what train-sft writes)."""
    folder = Path(adapter).expanduser()
    config = folder / "adapter_config.json"
    if not folder.is_dir():
        return f"{where}: no adapter folder {adapter}: train one with `unscaffold train-sft DATA --out {adapter}`"
    try:
        AdapterConfig.model_validate_json(config.read_bytes())
    except FileNotFoundError:
        return f"{where}: {adapter} has no adapter_config.json: give the folder train-sft wrote"
    except (OSError, ValueError) as e:  # pydantic's ValidationError is a ValueError
        return f"{where}: {config} is unreadable: {type(e).__name__}"
    return None


class ServedModel(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: str


class ModelList(BaseModel):
    """`GET /models` of an OpenAI-compatible server: the model ids it serves."""

    model_config = ConfigDict(extra="allow")
    data: list[ServedModel] = []


class AdapterConfig(BaseModel):
    """What the check reads of a PEFT adapter's config: that it is one (PEFT reads the rest)."""

    model_config = ConfigDict(extra="allow")
    peft_type: str | None = None
    base_model_name_or_path: str | None = None


# ---- sandbox and cluster ---------------------------------------------------------------------------------


def sandbox_problem(kind: str, flag: str = "--sandbox") -> str | None:
    """bubblewrap for `local`; a Docker daemon that answers for `docker`."""
    if kind == "local":
        from unscaffold.minimal_harness.sandbox.local import INSTALL_HINT

        return None if shutil.which("bwrap") else f"{flag} local: {INSTALL_HINT}"
    if kind == "docker":
        return docker_problem(flag)
    return None


def docker_problem(flag: str = "--sandbox") -> str | None:
    host = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    advice = "start it (`dockerd &` or `systemctl start docker`), or use --sandbox local"
    ping = b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n"
    if host.startswith("unix://"):
        path = host.removeprefix("unix://")
        if not Path(path).exists():
            return f"{flag} docker: no Docker daemon answers at {host} (no socket): {advice}"
        answer: bytes | str | None = _exchange(lambda s: s.connect(path), socket.AF_UNIX, ping, TIMEOUT_S)
    elif host.startswith(("tcp://", "http://", "https://")):
        h, port = _host_port(host.replace("tcp://", "http://"))
        answer = tcp_problem(h, port) or (None if host.startswith("https://") or os.environ.get("DOCKER_TLS_VERIFY")
                                          else _exchange(lambda s: s.connect((h, port)), socket.AF_INET, ping,
                                                         TIMEOUT_S))
        if answer is None:
            return None
    else:
        return None  # ssh:// and the like: the SDK knows how to reach them
    if isinstance(answer, bytes):
        return None if answer.startswith(b"HTTP/") else f"{flag} docker: {host} answers, but not as a Docker daemon"
    return f"{flag} docker: no Docker daemon answers at {host} ({answer}): {advice}"


def ray_problem(executor: ExecutorSpec | str, flag: str = "--executor") -> str | None:
    """`ray:ADDRESS` answers at its port; `ray:auto` finds a cluster started on this machine."""
    from unscaffold.specs import ExecutorSpec

    try:
        spec = executor if isinstance(executor, ExecutorSpec) else ExecutorSpec.parse(executor, flag=flag)
    except UnscaffoldError as e:
        return str(e)
    if spec.kind != "ray":
        return None
    try:
        import ray  # noqa: F401
    except ImportError:
        from unscaffold.run.executor_spec import INSTALL_RAY

        return f"{flag}: {INSTALL_RAY}"
    if not spec.address:
        return None  # a Ray instance of our own, started by the run
    where = f"{flag} {executor}"
    address = spec.address
    start = "start one with `ray start --head`, or use --executor ray for a local instance"
    if address == "auto":
        address = os.environ.get("RAY_ADDRESS") or ""
        if not address and RAY_CURRENT.is_file():
            address = RAY_CURRENT.read_text(encoding="utf-8").strip()
        if not address or address == "auto":
            return f"{where}: no running Ray cluster on this machine: {start}"
    if address == "local":
        return None
    host, port = _host_port(address.replace("ray://", "http://"))
    why = grpc_problem(host, port)
    return f"{where}: no Ray cluster answers at {address} ({why}): {start}" if why else None


# ---- what each command needs -----------------------------------------------------------------------------


def check_run(student: ModelSpec | str, reviewer: ReviewerSpec | str | None, sandbox: str,
              executor: ExecutorSpec | str = "local", others: Iterable[tuple[str, ModelSpec | str]] = ()) -> None:
    """`run` (routed too), `rescue route`: the student, the reviewer, other models by flag (profilers,
    voters), the sandbox and the cluster."""
    checks: list[Check] = [lambda: model_problem(student, "--student")]
    if reviewer:
        checks.append(lambda: model_problem(reviewer, "--reviewer"))
    checks += [lambda f=f, s=s: model_problem(s, f) for f, s in others]  # type: ignore[misc]
    checks.append(lambda: ray_problem(executor))
    if not str(executor).startswith("ray"):  # a cluster's workers have their own sandboxes, probed there
        checks.append(lambda: sandbox_problem(sandbox))
    run_checks(checks)


def check_training(model: str, flag: str = "--model") -> None:
    """`train-sft`, `demo`: the base model's config loads (a tiny template exists, a hub id is at hand)."""
    run_checks([lambda: model_path_problem(model, f"{flag} {model}")])


def check_models(specs: Iterable[tuple[str, ModelSpec | ReviewerSpec | str | None]], sandbox: str | None = None,
                 extra: Iterable[Check] = ()) -> None:
    """Commands that drive several models, each named by its flag (`evolve`, `demo`, `rescue train`), and
    what else the command needs (`extra`: a base model folder, vLLM)."""
    checks: list[Check] = [lambda f=f, s=s: model_problem(s, f) for f, s in specs if s]  # type: ignore[misc]
    if sandbox:
        checks.append(lambda: sandbox_problem(sandbox))
    run_checks([*checks, *extra])
