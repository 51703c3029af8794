"""The ReAct agent: the loop that lets an LLM call tools until `finish` (`react_controller.py`)
and the state one run changes (`loop_state.py`). Imports tools, llm, models; never service."""
