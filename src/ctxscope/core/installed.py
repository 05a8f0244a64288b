"""An installed distribution's version without importing ``importlib.metadata``.

``importlib.metadata`` imports email, zipfile, csv and more: about 45 ms of
CPU here, a fifth of a short ``analyze``, to read a version that the
``.dist-info`` folder beside the package names. Two cache keys need one: the
lookups cache's (genai-prices, ``core/limits.py``) and the encoding caches'
(tiktoken, ``core/encoding_load.py``).

Pure: no OpenTelemetry, no provider SDK.
"""

from __future__ import annotations

import os


def distribution_version(package: str, distribution: str) -> str | None:
    """The installed ``distribution``'s version (``package`` its import name); None when it is not installed.

    Read from the one ``<name>-<version>.dist-info`` folder beside the package
    (its name as installers write it: lower case, ``-`` and ``.`` as ``_``),
    the version ``importlib.metadata.version`` gives. Where there is no such
    single folder (another kind of install), ``importlib.metadata`` is asked
    after all.
    """
    import importlib.util  # here: a command that reads no version imports nothing for it

    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    prefix = distribution.lower().replace("-", "_").replace(".", "_") + "-"
    try:
        site = os.path.dirname(os.path.dirname(spec.origin or ""))
        found = [name for name in os.listdir(site)
                 if name.lower().startswith(prefix) and name.endswith(".dist-info")]
    except OSError:
        found = []
    if len(found) == 1:
        return found[0][len(prefix):-len(".dist-info")]
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None
