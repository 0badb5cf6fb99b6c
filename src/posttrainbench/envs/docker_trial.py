"""Harbor's Docker environment plus the delivery of an agent task's secrets.

Use it as ``--env posttrainbench.envs.docker_trial:DockerTrialEnvironment`` (Harbor's
``--environment-import-path``) for agent tasks that declare secrets: once the container
is up, and before the healthcheck starts the evaluation service, the secrets are
installed root-only at ``/run/ptb-secrets/secrets.json`` (see
:mod:`posttrainbench.envs.service_secrets`). Everything else is Harbor's
``DockerEnvironment`` unchanged; tasks without secrets behave exactly as with
``--env docker``.
"""

from __future__ import annotations

from harbor.environments.docker.docker import DockerEnvironment

from posttrainbench.envs.service_secrets import ServiceSecretsMixin


class DockerTrialEnvironment(ServiceSecretsMixin, DockerEnvironment):
    """Docker containers that receive the task's declared secrets as a root-only file."""
