"""``glmctl`` — render, validate and run, with or without a cluster.

Exit codes: 0 success; 1 the input is invalid (findings printed to stderr); 2 usage errors.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from glm_operator import __version__, versions
from glm_operator.api.crd import build_crd
from glm_operator.api.findings import Finding, Severity, SpecInvalidError, show_value
from glm_operator.api.load import parse
from glm_operator.api.spec import KIND
from glm_operator.plan import rules
from glm_operator.plan.capacity import Plan, plan_deployment
from glm_operator.plan.report import gib, plan_report, plan_report_findings, table_rows
from glm_operator.render.manifests import Rendered, render
from glm_operator.render.serialize import to_json, to_yaml

app = typer.Typer(
    name="glmctl",
    help="Plan, render, validate and run GLMDeployments (long-context GLM-5.x on vLLM + llm-d).",
    no_args_is_help=True,
    add_completion=False,
)
err = Console(stderr=True, soft_wrap=True, highlight=False)
#: Tables keep their width when stdout is a pipe or a CI log (rich would wrap them at 80 columns).
out = Console(soft_wrap=True, highlight=False, width=None if sys.stdout.isatty() else 160)


class InputError(Exception):
    """A file that cannot be read or is not YAML; the message says which and why."""


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing duplicate mapping keys (kubectl refuses them too)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        """Build a mapping; raises ``ConstructorError`` naming a duplicate key and its line."""
        self.flatten_mapping(node)  # resolve YAML merge keys (<<) first; they are not duplicates
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load_documents(path: Path) -> list[dict[str, Any]]:
    """Read every YAML document of ``path`` (``-`` = stdin) that is a GLMDeployment.

    Raises:
        InputError: the file is missing, not YAML, or holds no GLMDeployment.
    """
    try:
        text = sys.stdin.read() if str(path) == "-" else path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (byte {exc.start}); a GLMDeployment is a YAML file") from exc
    try:
        docs = [d for d in yaml.load_all(text, Loader=_UniqueKeyLoader) if d is not None]
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: not valid YAML: {exc}") from exc
    if not all(isinstance(d, dict) for d in docs):
        raise InputError(f"{path}: every YAML document must be a mapping")
    found = [d for d in docs if d.get("kind") == KIND]
    if not found:
        raise InputError(f"{path}: no {KIND} document found (kind: {KIND})")
    return found


class DocumentError(Exception):
    """One document of a multi-document file is invalid; ``source`` names the file and document."""

    def __init__(self, source: str, error: SpecInvalidError) -> None:
        super().__init__(source)
        self.source = source
        self.error = error


def render_documents(path: Path, namespace: str | None = None) -> list[Rendered]:
    """Parse and render every GLMDeployment in ``path``.

    ``namespace`` (like ``kubectl -n``) applies to documents without ``metadata.namespace``; a
    document in another namespace is an error. Without it, such documents use ``default``.

    Raises:
        InputError: unreadable file, the same namespace/name twice, or a namespace conflict.
        DocumentError: a document is invalid (says which one when there are several).
    """
    docs = load_documents(path)
    if namespace is not None:
        for doc in docs:
            doc_meta = doc.setdefault("metadata", {})
            if not isinstance(doc_meta, dict):
                continue  # parse() reports the malformed metadata
            current = doc_meta.get("namespace")
            if current not in (None, namespace):
                raise InputError(
                    f"{path}: {doc_meta.get('name')} is in namespace {current!r}, not {namespace!r} (--namespace); "
                    "remove one of them"
                )
            doc_meta["namespace"] = namespace
    seen: set[tuple[str, str]] = set()
    results = []
    for index, doc in enumerate(docs, start=1):
        raw_meta = doc.get("metadata")
        meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
        key = (str(meta.get("namespace") or "default"), str(meta.get("name") or ""))
        if key in seen:
            raise InputError(f"{path}: GLMDeployment {key[0]}/{key[1]} appears twice (document {index})")
        seen.add(key)
        try:
            results.append(render(parse(doc)))
        except SpecInvalidError as exc:
            source = f"{path} (document {index}, {key[1] or 'unnamed'})" if len(docs) > 1 else str(path)
            raise DocumentError(source, exc) from exc
    return results


def print_findings(findings: list[Finding], source: str) -> None:
    """Findings on stderr, one block each: severity, field = value, the problem, the fix."""
    errors = sum(f.severity == Severity.ERROR for f in findings)
    label = f"{errors} error(s)" if errors else f"{len(findings)} warning(s)"
    err.print(escape(f"{source}: {label}"))
    for f in findings:
        style = "red" if f.severity == Severity.ERROR else "yellow"
        value = show_value(f.value)
        err.print(f"[{style}]{f.severity}[/] [bold]{escape(f.field)}[/] = {escape(value)}")
        err.print(f"    {escape(f.message)}")
        err.print(f"    fix: {escape(f.fix)}")


def _fail(exc: Exception, path: Path) -> typer.Exit:
    if isinstance(exc, DocumentError):
        print_findings(exc.error.findings, exc.source)
    elif isinstance(exc, SpecInvalidError):
        print_findings(exc.findings, str(path))
    else:
        err.print(f"[red]error:[/] {escape(str(exc))}")
    return typer.Exit(code=1)


NamespaceOption = Annotated[
    str | None,
    typer.Option("--namespace", "-n", help="Namespace for CRs that set none (default: default), as kubectl -n."),
]


@app.command("render")
def render_cmd(
    file: Annotated[Path, typer.Argument(help="GLMDeployment YAML file, or - for stdin.")],
    output: Annotated[str, typer.Option("--output", "-o", help="yaml or json.")] = "yaml",
    namespace: NamespaceOption = None,
) -> None:
    """Print every manifest the operator would apply (no cluster needed; for GitOps)."""
    if output not in {"yaml", "json"}:
        err.print(f"[red]error:[/] --output must be yaml or json, not {escape(repr(output))}")
        raise typer.Exit(code=2)
    try:
        results = render_documents(file, namespace)
    except (InputError, DocumentError) as exc:
        raise _fail(exc, file) from None
    objects = [obj for result in results for obj in result.objects]
    for result in results:
        if result.warnings:
            print_findings(result.warnings, str(file))
    sys.stdout.write(to_yaml(objects) if output == "yaml" else to_json(objects))


@app.command("validate")
def validate_cmd(
    files: Annotated[list[Path], typer.Argument(help="GLMDeployment YAML files (as pre-commit passes them), or -.")],
    namespace: NamespaceOption = None,
) -> None:
    """Check GLMDeployments against the schema and every rule; print "valid" or the problems of each file.

    Exits 1 when any file has an error (every file is still checked)."""
    failed = False
    for file in files:
        try:
            results = render_documents(file, namespace)
        except (InputError, DocumentError) as exc:
            _fail(exc, file)
            failed = True
            continue
        for result in results:
            if result.warnings:
                print_findings(result.warnings, str(file))
        warnings = sum(len(result.warnings) for result in results)
        typer.echo(f"{file}: valid" + (f" ({warnings} warning(s) above)" if warnings else ""))
    if failed:
        raise typer.Exit(code=1)


@app.command("plan")
def plan_cmd(
    file: Annotated[Path, typer.Argument(help="GLMDeployment YAML file, or - for stdin.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the plan as JSON.")] = False,
    namespace: NamespaceOption = None,
) -> None:
    """Print the capacity plan: weights and KV per GPU, max context and concurrency per role.

    Exits 1 when a rule refuses the CR (the plan is still printed, then the problems)."""
    try:
        docs = load_documents(file)
    except InputError as exc:
        raise _fail(exc, file) from None
    failed = False
    reports = []
    for index, doc in enumerate(docs, start=1):
        if namespace is not None and isinstance(doc.get("metadata"), dict):
            doc["metadata"].setdefault("namespace", namespace)
        source = f"{file} (document {index})" if len(docs) > 1 else str(file)
        try:
            deployment = parse(doc)
        except SpecInvalidError as exc:
            print_findings(exc.findings, source)
            failed = True
            raw = doc.get("metadata")
            meta: dict[str, Any] = raw if isinstance(raw, dict) else {}
            reports.append({"name": meta.get("name"), "namespace": meta.get("namespace"),
                            "findings": plan_report_findings(exc.findings)})
            continue
        plan = plan_deployment(deployment.spec)
        findings = rules.check(deployment.spec)
        failed = failed or bool(rules.errors(findings))
        if as_json:
            reports.append({"name": deployment.name, "namespace": deployment.namespace,
                            **plan_report(plan, findings)})
            continue
        print_plan(deployment.name, plan)
        if findings:
            print_findings(findings, source)
    if as_json and reports:
        sys.stdout.write(json.dumps(reports[0] if len(reports) == 1 else reports, indent=2) + "\n")
    if failed:
        raise typer.Exit(code=1)


def print_plan(name: str, plan: Plan) -> None:
    """The plan of one GLMDeployment as a table on stdout."""
    limit = f"model limit {plan.model_max_context:,}"
    source = {"spec": f"spec.model.maxModelLen; {limit}", "model": "the model's limit",
              "kvBudget": f"derived from the KV budget; {limit}"}[plan.max_model_len_source]
    ridge = f", ridge {plan.ridge_flop_per_byte:.0f} FLOP/B" if plan.ridge_flop_per_byte else ""
    out.print(escape(
        f"{name}: {plan.model.name} ({plan.quantization} weights) on {plan.gpu.name} "
        f"({gib(plan.gpu.hbm_bytes)}{ridge})"
    ))
    out.print(escape(
        f"KV {plan.kv.total:,} B/token ({plan.kv.mla:,} MLA + {plan.kv.indexer:,} indexer); max context "
        f"{plan.max_model_len:,} tokens ({source})"
    ))
    table = Table(show_header=True, header_style="bold")
    table.add_column("")
    for role in plan.roles:
        table.add_column(role, justify="right")
    for label, cells in table_rows(plan):
        table.add_row(escape(label), *(escape(c) for c in cells))
    out.print(table)


@app.command("crd")
def crd_cmd() -> None:
    """Print the GLMDeployment CustomResourceDefinition generated from the typed API."""
    sys.stdout.write(yaml.safe_dump(build_crd(), sort_keys=False, width=120))


@app.command("version")
def version_cmd() -> None:
    """Print the operator version and the pinned vLLM / llm-d version tuple."""
    typer.echo(f"glm-operator {__version__}")
    for component, value in versions.version_table():
        typer.echo(f"  {component}: {value}")


#: Log level of ``glmctl run`` unless ``--verbose`` (env ``GLM_LOG_LEVEL``: DEBUG, INFO, WARNING, ERROR).
LOG_LEVEL_ENV = "GLM_LOG_LEVEL"


def configure_logging(verbose: bool) -> int:
    """One plain line per log record on stderr (``time LEVEL [namespace/name] message``), at DEBUG with
    ``--verbose``, else ``$GLM_LOG_LEVEL`` (default INFO). Returns the level.

    Raises:
        ValueError: ``$GLM_LOG_LEVEL`` is not a level name.
    """
    import kopf  # noqa: PLC0415

    raw = os.environ.get(LOG_LEVEL_ENV, "INFO").upper()
    level = logging.DEBUG if verbose else logging.getLevelName(raw)
    if not isinstance(level, int):
        raise ValueError(f"{LOG_LEVEL_ENV}={raw!r} is not a log level; use DEBUG, INFO, WARNING or ERROR")
    kopf.configure(debug=False, verbose=verbose, log_format=kopf.LogFormat.PLAIN, log_prefix=True)
    logging.getLogger().setLevel(level)
    return level


def check_cluster_config() -> str | None:
    """Load the in-cluster config or the kubeconfig once, before kopf starts; ``None`` when usable,
    else one line: which file, what is wrong, how to fix it."""
    from glm_operator.cluster.apiclient import make_api_client  # noqa: PLC0415

    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        source = "the in-cluster service account (/var/run/secrets/kubernetes.io/serviceaccount)"
        fix = "check the pod's serviceAccountName and automountServiceAccountToken"
    else:
        source = os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")
        fix = "set KUBECONFIG to a readable kubeconfig (`kubectl config view` shows it) or pass --kubeconfig"
        first = Path(source.split(os.pathsep)[0])
        if not first.is_file():
            return f"cannot load the Kubernetes configuration from {source}: no such file; fix: {fix}"
        try:
            first.read_bytes()
        except OSError as exc:
            return f"cannot load the Kubernetes configuration from {source}: {exc.strerror}; fix: {fix}"
    try:
        api = make_api_client()
    except ValueError as exc:  # GLM_API_TIMEOUT_SECONDS
        return str(exc)
    except Exception as exc:
        problem = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc).strip().splitlines()[0]
        return f"cannot load the Kubernetes configuration from {source}: {problem}; fix: {fix}"
    return _preflight(api, source)


def _preflight(api: Any, source: str) -> str | None:
    """One authenticated request (``GET /version``) before kopf starts: a wrong token or an unreachable server is
    one line instead of kopf's retry loop and traceback; ``None`` when the API server answered."""
    from kubernetes import client  # noqa: PLC0415
    from kubernetes.client.exceptions import ApiException  # noqa: PLC0415
    from urllib3.exceptions import HTTPError  # noqa: PLC0415

    host = api.configuration.host
    urllib3_log = logging.getLogger("urllib3")
    level, urllib3_log.level = urllib3_log.level, logging.ERROR  # its "Retrying …" warnings: the one line says it
    try:
        client.VersionApi(api).get_code(_request_timeout=min(api.default_timeout_seconds, 10.0))
    except ApiException as exc:
        return (f"the API server at {host} refused the credentials from {source} (HTTP {exc.status} {exc.reason}); "
                "fix: renew the token or client certificate there, or use a kubeconfig of this cluster")
    except (HTTPError, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc
        return (f"cannot reach the API server at {host} ({source}): {str(reason).splitlines()[0][:200]}; "
                "fix: check the server address there and that the API server runs")
    finally:
        urllib3_log.setLevel(level)
    return None


@app.command("run")
def run_cmd(
    namespace: Annotated[
        list[str] | None, typer.Option("--namespace", "-n", help="Watch only these namespaces (repeatable).")
    ] = None,
    liveness: Annotated[
        str | None, typer.Option(help="Serve a liveness endpoint, e.g. http://0.0.0.0:8080/healthz.")
    ] = None,
    peering: Annotated[
        bool, typer.Option(help="Use kopf peering (needs its peering CRDs) instead of standalone mode.")
    ] = False,
    kubeconfig: Annotated[
        Path | None, typer.Option("--kubeconfig", help="Kubeconfig file (default: $KUBECONFIG, ~/.kube/config).")
    ] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")] = False,
) -> None:
    """Run the operator against the cluster of $KUBECONFIG (or the in-cluster service account).

    Exits 2 with one line on stderr when the kubeconfig (or ``GLM_*`` setting) is unusable."""
    if kubeconfig is not None:
        os.environ["KUBECONFIG"] = str(kubeconfig)
    try:
        configure_logging(verbose)
    except ValueError as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}")
        raise typer.Exit(code=2) from None
    problem = check_cluster_config()
    if problem is not None:
        err.print(f"[red]error:[/] {escape(problem)}")
        raise typer.Exit(code=2)

    import kopf  # noqa: PLC0415  (kopf only for `run`: render/validate stay light)

    import glm_operator.handlers  # noqa: F401, PLC0415  (registers the handlers)

    kopf.run(
        standalone=not peering,
        namespaces=namespace or [],
        clusterwide=not namespace,
        liveness_endpoint=liveness,
    )


@app.command("dev")
def dev_cmd(
    example: Annotated[Path, typer.Option(help="CR to apply once the operator runs.")] = Path(
        "examples/glm-5.3-pd.yaml"
    ),
    once: Annotated[bool, typer.Option(help="Exit 0 once the CR is Ready (1 with the reason otherwise).")] = False,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the CR to become Ready.")] = 180.0,
    state_dir: Annotated[
        Path | None, typer.Option(help="Where the cluster keeps PKI, data, kubeconfigs, logs (default: a temp dir).")
    ] = None,
) -> None:
    """Start a local Kubernetes cluster (fake H200 nodes), install the chart, run the operator, apply an example."""
    try:
        from glm_localcluster.dev import run_dev  # noqa: PLC0415  (development checkout only, not in the wheel)
    except ImportError:
        typer.echo("glmctl dev needs the development checkout's local cluster (tools/localcluster): run `make run` "
                   "from the repository", err=True)
        raise typer.Exit(code=2) from None
    try:
        render_documents(example)  # an invalid example exits 2 with its findings before anything starts
    except (InputError, DocumentError, SpecInvalidError) as exc:
        _fail(exc, example)
        raise typer.Exit(code=2) from None
    raise typer.Exit(code=run_dev(example=example, once=once, timeout=timeout, state_dir=state_dir))


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
