"""Which credentials an agent needs, where they come from, and what the agent is given.

An agent authenticates with an API key from the environment, or with a subscription
credential (Codex `auth.json`, a Claude Code OAuth token, Gemini CLI OAuth creds) kept
in a secrets directory outside the repository. Resolution happens on the host before
anything is compiled or built; its result is an environment overlay for Harbor's
`AgentConfig.env` (Harbor hands it to the agent, which uploads credential files into
the sandbox itself), so no secret is ever written into a task directory or a result.

Host-side module; stdlib + pydantic only.
"""

from __future__ import annotations

import stat
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from posttrainbench.core.errors import PtbError

SECRETS_DIR_ENV = "PTB_SECRETS_DIR"
DEFAULT_SECRETS_DIR = Path("~/.config/posttrainbench/secrets")


class CredentialError(PtbError):
    """A required secret is missing, unreadable, badly protected or badly placed."""


class AuthMode(StrEnum):
    """How the user wants the agent to authenticate (`ptb run --auth`)."""

    AUTO = "auto"  # the subscription credential when its file exists, else an API key
    API_KEY = "api-key"
    SUBSCRIPTION = "subscription"


class SubscriptionSpec(BaseModel):
    """A subscription credential file in the secrets directory, and how the agent gets it."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(description="What the user calls it, e.g. 'Codex auth.json'")
    file: str = Field(description="Path relative to the secrets directory")
    env_var: str = Field(description="Variable that carries the file's path or content")
    pass_content: bool = Field(
        default=False, description="Pass the (stripped) file content instead of its host path"
    )
    extra_env: dict[str, str] = Field(default_factory=dict, description="Switches the agent needs")


class AgentCredentialSpec(BaseModel):
    """The credentials one agent can use."""

    model_config = ConfigDict(frozen=True)

    profile: str
    api_key_vars: tuple[str, ...] = Field(
        default=(), description="Any one of these in the environment authenticates the agent"
    )
    subscription: SubscriptionSpec | None = None
    required: bool = True


# API-key variables per model provider: used for agents whose provider follows from
# -m/--model (OpenCode), and for the provider of the fixed-provider agents.
PROVIDER_KEYS: dict[str, tuple[str, ...]] = {
    "anthropic": ("ANTHROPIC_API_KEY",),
    "openai": ("OPENAI_API_KEY",),
    "google": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "openrouter": ("OPENROUTER_API_KEY",),
    "xai": ("XAI_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "mistral": ("MISTRAL_API_KEY",),
    "groq": ("GROQ_API_KEY",),
    # Zhipu's GLM models through OpenCode (models.dev providers; OpenCode reads
    # ZHIPU_API_KEY, LiteLLM and Harbor know Z.AI's key as ZAI_API_KEY). See
    # posttrainbench.host.agents.opencode_glm for the provider block.
    "zai": ("ZHIPU_API_KEY", "ZAI_API_KEY"),
    "zai-coding-plan": ("ZHIPU_API_KEY", "ZAI_API_KEY"),
    "zhipuai": ("ZHIPU_API_KEY",),
}

# Variables and files as Harbor 0.26's installed agents read them
# (agents/installed/{claude_code,codex,gemini_cli}.py).
AGENT_SPECS: dict[str, AgentCredentialSpec] = {
    "claude-code": AgentCredentialSpec(
        profile="claude-code",
        api_key_vars=("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"),
        subscription=SubscriptionSpec(
            name="Claude Code OAuth token",
            file="claude-code/oauth_token",
            env_var="CLAUDE_CODE_OAUTH_TOKEN",
            pass_content=True,
            extra_env={"CLAUDE_FORCE_OAUTH": "1"},
        ),
    ),
    "codex": AgentCredentialSpec(
        profile="codex",
        api_key_vars=("OPENAI_API_KEY", "CODEX_API_KEY"),
        subscription=SubscriptionSpec(
            name="Codex auth.json", file="codex/auth.json", env_var="CODEX_AUTH_JSON_PATH"
        ),
    ),
    "gemini-cli": AgentCredentialSpec(
        profile="gemini-cli",
        api_key_vars=("GEMINI_API_KEY", "GOOGLE_API_KEY"),
        subscription=SubscriptionSpec(
            name="Gemini CLI OAuth credentials",
            file="gemini/oauth_creds.json",
            env_var="GEMINI_OAUTH_CREDS_PATH",
        ),
    ),
}

NO_CREDENTIALS = ("oracle", "nop")


class CredentialSummary(BaseModel):
    """What `run.json` records about the credential used: names and kinds, never values."""

    profile: str | None = None
    kind: str = Field(default="none", description="none, api-key or subscription")
    source: str | None = Field(default=None, description="environment or secrets-dir")
    variables: list[str] = Field(default_factory=list, description="Variables given to the agent")
    removed: list[str] = Field(
        default_factory=list, description="API-key variables blanked because a subscription is used"
    )
    file: str | None = Field(
        default=None, description="Credential file, relative to the secrets dir"
    )


class ResolvedCredentials(BaseModel):
    """The result of resolution: what Harbor passes to the agent, and what to scrub."""

    model_config = ConfigDict(frozen=True)

    summary: CredentialSummary
    agent_env: dict[str, str] = Field(
        default_factory=dict,
        description="Overlay for Harbor's AgentConfig.env; `${VAR}` templates for environment keys",
    )
    secret_values: dict[str, str] = Field(
        default_factory=dict, repr=False, description="Name -> secret value, for the scrubber only"
    )
    message: str | None = Field(default=None, description="One info line for the user")


def spec_for(
    agent: str, agent_model: str | None = None, profile: str | None = None
) -> AgentCredentialSpec:
    """The credential spec of an agent name (or of `profile`, for a custom `module:Class`)."""
    name = profile or agent
    if name in AGENT_SPECS:
        return AGENT_SPECS[name]
    if name == "opencode":
        provider = (agent_model or "").split("/", 1)[0].lower()
        keys = PROVIDER_KEYS.get(provider)
        # Without a known provider we cannot tell which key OpenCode will read.
        return AgentCredentialSpec(profile=name, api_key_vars=keys or (), required=keys is not None)
    if profile is not None and name not in NO_CREDENTIALS:
        known = ", ".join([*AGENT_SPECS, "opencode", *NO_CREDENTIALS])
        raise CredentialError(f"unknown credential profile {profile!r}; choose one of: {known}")
    return AgentCredentialSpec(profile=name, required=False)


def secrets_dir_from(explicit: Path | None, env: Mapping[str, str]) -> tuple[Path, bool]:
    """The secrets directory (`--secrets-dir`, else $PTB_SECRETS_DIR, else the default)
    and whether the user named it (a named one must exist)."""
    if explicit is not None:
        return explicit.expanduser().resolve(), True
    if env.get(SECRETS_DIR_ENV):
        return Path(env[SECRETS_DIR_ENV]).expanduser().resolve(), True
    return DEFAULT_SECRETS_DIR.expanduser().resolve(), False


def repository_root(start: Path) -> Path | None:
    """The nearest directory at or above `start` holding `.git`, if any."""
    for candidate in (start, *start.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def forbidden_roots(runs_dir: Path, cwd: Path | None = None) -> list[Path]:
    """Directories a secrets dir must not be inside: the output dir (where task dirs and
    results go), the repository of the working directory and PostTrainBench's checkout."""
    roots = [runs_dir.expanduser().resolve()]
    for start in (Path(cwd or Path.cwd()).resolve(), Path(__file__).resolve().parent):
        root = repository_root(start)
        if root is not None and root not in roots:
            roots.append(root)
    return roots


def check_secrets_dir_location(secrets_dir: Path, forbidden: list[Path]) -> None:
    """Refuse a secrets dir inside a repository, task or output dir (it would be copied)."""
    for root in forbidden:
        if secrets_dir == root or root in secrets_dir.parents:
            raise CredentialError(
                f"secrets dir {secrets_dir} is inside {root}; keep secrets outside the repository "
                f"and output directories (default {DEFAULT_SECRETS_DIR}, or --secrets-dir / {SECRETS_DIR_ENV})"
            )


def read_secret_file(path: Path) -> str:
    """Read a secret file that only its owner can read (mode 0600 or 0400)."""
    try:
        info = path.stat()
    except OSError as exc:
        raise CredentialError(f"cannot read secret file {path}: {exc.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise CredentialError(f"secret file {path} is not a regular file")
    if info.st_mode & 0o077:
        raise CredentialError(
            f"secret file {path} is readable by others (mode {stat.S_IMODE(info.st_mode):04o}); "
            f"run `chmod 600 {path}`"
        )
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise CredentialError(f"cannot read secret file {path}: {exc}") from None


def file_secret_values(label: str, content: str) -> dict[str, str]:
    """The secret strings inside a credential file: the token of a plain-text file, or
    every string under a secret-looking key of a JSON file (tokens, keys, account ids)."""
    import json

    try:
        data = json.loads(content)
    except ValueError:
        return {label: content.strip()} if content.strip() else {}
    found: dict[str, str] = {}

    def walk(node: object, key: str) -> None:
        if isinstance(node, dict):
            for child_key, child in node.items():
                walk(child, str(child_key))
        elif isinstance(node, list):
            for child in node:
                walk(child, key)
        elif isinstance(node, str) and node and _looks_secret_key(key):
            found[f"{label}:{key}"] = node

    walk(data, "")
    return found


def _looks_secret_key(key: str) -> bool:
    lowered = key.lower()
    return any(
        word in lowered for word in ("token", "key", "secret", "password", "credential", "_id")
    )


def resolve_credentials(
    spec: AgentCredentialSpec,
    env: Mapping[str, str],
    *,
    mode: AuthMode = AuthMode.AUTO,
    secrets_dir: Path | None = None,
    forbidden: list[Path] | None = None,
) -> ResolvedCredentials:
    """Decide how the agent authenticates; raise CredentialError naming what is missing.

    A subscription credential wins in `auto` mode when its file exists; the provider's
    API-key variables are then blanked in the agent's environment (an empty value in
    Harbor's overlay hides the host's variable from the agent), so a run cannot silently
    bill an API account. API keys are passed as `${VAR}` templates, which Harbor resolves
    at run time and writes back as templates, never as values, in its config files.
    """
    directory, named = secrets_dir_from(secrets_dir, env)
    if named and not directory.is_dir():
        raise CredentialError(f"secrets dir {directory} does not exist")
    if directory.is_dir():
        check_secrets_dir_location(directory, forbidden or [])
    present_keys = [var for var in spec.api_key_vars if env.get(var)]
    subscription = spec.subscription
    sub_path = directory / subscription.file if subscription else None
    use_subscription = subscription is not None and (
        mode is AuthMode.SUBSCRIPTION
        or (
            mode is AuthMode.AUTO
            and sub_path is not None
            and (sub_path.exists() or sub_path.is_symlink())
        )
        or (
            mode is AuthMode.AUTO
            and subscription.pass_content
            and bool(env.get(subscription.env_var))
        )
    )
    if mode is AuthMode.SUBSCRIPTION and subscription is None:
        raise CredentialError(f"{spec.profile} has no subscription credential; use --auth api-key")
    if use_subscription:
        return _subscription(spec, env, directory, mode)
    if not present_keys:
        if not spec.required and mode is AuthMode.AUTO:
            return ResolvedCredentials(summary=CredentialSummary(profile=spec.profile))
        raise CredentialError(_missing_message(spec, directory, mode))
    return ResolvedCredentials(
        summary=CredentialSummary(
            profile=spec.profile, kind="api-key", source="environment", variables=present_keys
        ),
        agent_env={var: f"${{{var}}}" for var in present_keys},
        secret_values={var: env[var] for var in present_keys},
        message=f"credentials: {spec.profile} uses the API key in {', '.join(present_keys)}",
    )


def _subscription(
    spec: AgentCredentialSpec, env: Mapping[str, str], directory: Path, mode: AuthMode
) -> ResolvedCredentials:
    sub = spec.subscription
    assert sub is not None
    path = directory / sub.file
    removed = list(spec.api_key_vars)
    blanked = {var: "" for var in removed}
    if sub.pass_content and env.get(sub.env_var) and not path.exists():
        # The token itself was exported (e.g. CLAUDE_CODE_OAUTH_TOKEN): same treatment.
        token = env[sub.env_var]
        source, file_label = "environment", None
        agent_env = {sub.env_var: f"${{{sub.env_var}}}"}
        values = {sub.env_var: token}
    else:
        if not path.exists():
            raise CredentialError(
                f"{spec.profile} --auth {mode.value} needs the {sub.name} at {path} (mode 0600)"
            )
        content = read_secret_file(path)
        source, file_label = "secrets-dir", sub.file
        values = file_secret_values(sub.file, content)
        if sub.pass_content:
            agent_env = {sub.env_var: content.strip()}
            values[sub.env_var] = content.strip()
        else:
            agent_env = {sub.env_var: str(path)}
    dropped = [var for var in removed if env.get(var)]
    note = f"; {', '.join(dropped)} removed from the agent's environment" if dropped else ""
    return ResolvedCredentials(
        summary=CredentialSummary(
            profile=spec.profile,
            kind="subscription",
            source=source,
            variables=[sub.env_var, *sub.extra_env],
            removed=removed,
            file=file_label,
        ),
        agent_env={**blanked, **sub.extra_env, **agent_env},
        secret_values=values,
        message=f"credentials: {spec.profile} uses the {sub.name} ({source}){note}",
    )


def _missing_message(spec: AgentCredentialSpec, directory: Path, mode: AuthMode) -> str:
    if not spec.api_key_vars:
        return f"{spec.profile} needs credentials, but its provider is unknown; set -m/--model provider/model"
    keys = " or ".join(spec.api_key_vars)
    if spec.subscription is None or mode is AuthMode.API_KEY:
        return f"{spec.profile} needs {keys} in the environment"
    return (
        f"{spec.profile} needs {keys} in the environment, or the {spec.subscription.name} "
        f"at {directory / spec.subscription.file} (mode 0600)"
    )
