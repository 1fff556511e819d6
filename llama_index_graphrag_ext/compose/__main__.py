"""``python -m llama_index_graphrag_ext.compose --data DIR``: measure shared indexing work.

See [`measure_sharing`][llama_index_graphrag_ext.compose.sharing.measure_sharing].
"""

from .sharing import main

main()
