"""Async client for the GNS3 v3 REST API and the structured project topology.

No LangChain here: the tools in ``gns3_copilot.tools`` wrap this package.
"""

from .client import NODE_ACTIONS, GNS3Client, GNS3Connection, NodeAction
from .exceptions import (
    GNS3APIError,
    GNS3AuthenticationError,
    GNS3ConflictError,
    GNS3ConnectionError,
    GNS3Error,
    GNS3NotFoundError,
    GNS3PermissionError,
    GNS3ServerError,
    GNS3TimeoutError,
)
from .topology import Endpoint, Link, Node, Port, Topology, fetch_rest_topology, fetch_topology

__all__ = [
    "GNS3Client",
    "NodeAction",
    "NODE_ACTIONS",
    "GNS3Connection",
    "GNS3Error",
    "GNS3ConnectionError",
    "GNS3TimeoutError",
    "GNS3APIError",
    "GNS3AuthenticationError",
    "GNS3PermissionError",
    "GNS3NotFoundError",
    "GNS3ConflictError",
    "GNS3ServerError",
    "Topology",
    "Node",
    "Port",
    "Link",
    "Endpoint",
    "fetch_rest_topology",
    "fetch_topology",
]
