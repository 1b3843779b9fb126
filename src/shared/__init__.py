"""Domain logic, service adapters, data access and observability shared by the handlers."""
