"""LangChain tools the copilot agent may call; they reach GNS3 through ``gns3_client``."""

from .topology import GNS3TopologyTool, TopologyInput

__all__ = ["GNS3TopologyTool", "TopologyInput"]
