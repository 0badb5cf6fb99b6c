"""What every part of an agent task's service uses: the config, datasets, candidate
identities and their confined runs, the candidate store, and the standard-library helper
scripts the launcher runs by path (``confine``, ``tar_stream``, ``probe``)."""
