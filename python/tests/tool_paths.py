"""Where the tests find the built tools: $VARIABLE, else build/bin/NAME."""

from __future__ import annotations

import os
from typing import Optional

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def find_tool(variable: str, name: str) -> Optional[str]:
    """The executable $variable names, else build/bin/<name>; None when neither is."""
    for candidate in (os.environ.get(variable), os.path.join(REPO_ROOT, "build", "bin", name)):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None
