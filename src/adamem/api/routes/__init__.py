"""The service's routes, one router per concern, each built over the running ``Service``."""
