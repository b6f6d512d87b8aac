"""Policy profiles (YAML) and their pydantic models."""

from statebox.policies.model import Policy, load_policy

__all__ = ["Policy", "load_policy"]
