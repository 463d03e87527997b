"""The built-in transformers: args, project."""

from toolproof.extensions.transformers.args import ArgsConfig, args_factory
from toolproof.extensions.transformers.project import ProjectConfig, project_factory

__all__ = ["ArgsConfig", "ProjectConfig", "args_factory", "project_factory"]
