"""The Responses API in terms of chat completions, both ways: the one translation.

Three modules, one per direction: :mod:`.request` (a Responses request as a chat
completion request), :mod:`.response` (a chat completion as a ``response``) and
:mod:`.events` (a stream of chat chunks as the Responses API's events).

A Responses request becomes a chat completion request (:func:`.request.chat_body`), which
any mode serves as it serves chat; the chat completion that comes back becomes a
``response`` (:func:`.response.to_response`), and a stream of chunks becomes the Responses
API's typed events, numbered in order (:class:`.events.EventTranslator`).

What maps to what:

=====================================  ===============================================
Responses                              chat completions
=====================================  ===============================================
``instructions``                       a first ``system`` message (not carried over
                                       by ``previous_response_id``, as OpenAI does)
``input`` string / message items       ``user`` / ``assistant`` / ``system`` messages
                                       (``developer`` becomes ``system``)
``function_call`` items                an assistant message's ``tool_calls``
``function_call_output`` items         ``tool`` messages
``reasoning`` items                    dropped: chat has no place for them
flat function ``tools``                ``{"type": "function", "function": {...}}``
``text.format`` (JSON schema)          ``response_format``
``max_output_tokens``                  ``max_completion_tokens``
``reasoning.effort``                   ``reasoning_effort``
message ``reasoning_content``          a ``reasoning`` output item with a summary
finish ``length`` / ``content_filter``  ``incomplete`` with that reason
=====================================  ===============================================
"""
