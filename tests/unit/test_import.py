def test_placeholder():
    import gns3server.agent.gns3_copilot
    import gns3server.api.server

