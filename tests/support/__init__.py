"""Helpers the tests import (fixtures stay in the conftest files, where pytest finds them)."""
