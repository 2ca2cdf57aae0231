"""One-line justonce integrations for Python agent frameworks.

Each framework's helpers live in their own module (`justonce_client.pydantic_ai`,
`justonce_client.openai_agents`, `justonce_client.langchain`,
`justonce_client.llama_index`), imported on use so that only the framework you use
needs to be installed. What they share is here: the names the host reads, the timeout
that fits its waits, and `Refused`, what a refusal of the host is raised as.
"""

from ._host import CONVERSATION_HEADER, CONVERSATION_META, READ_TIMEOUT_S, Refused, refusal_in

__version__ = "0.1.0"

__all__ = ["CONVERSATION_HEADER", "CONVERSATION_META", "READ_TIMEOUT_S", "Refused", "refusal_in", "__version__"]
