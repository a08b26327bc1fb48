"""Hooks: resolve the jrs connection and config into a store and leases."""

from airflow_jrs.hooks.jrs import JrsHook, JrsSettings

__all__ = ["JrsHook", "JrsSettings"]
