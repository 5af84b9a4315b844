"""Model providers behind one neutral Messages interface.

`messages` holds the provider-neutral request and response and the `MessagesProvider` protocol;
`pricing` turns usage into cost (batched calls at the batch rate); `batches` answers concurrent
calls through one Message Batch (`BatchingProvider`, SDK-free); `anthropic` (imported only
where Claude is used) is the one module that imports the `anthropic` SDK.
"""

from pipeline.providers.batches import BatchingProvider
from pipeline.providers.messages import (
    MessagesProvider,
    MessagesRequest,
    MessagesResponse,
    Usage,
)
from pipeline.providers.pricing import PriceTable, cost_usd, load_prices

__all__ = [
    "BatchingProvider",
    "MessagesProvider",
    "MessagesRequest",
    "MessagesResponse",
    "PriceTable",
    "Usage",
    "cost_usd",
    "load_prices",
]
