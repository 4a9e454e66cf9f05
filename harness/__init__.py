"""mrecord's own test and benchmark harnesses (not shipped, like ``reliability/``).

Stand-ins for remote storage (:mod:`~harness.servers`), a load test of ``mrecord serve``
(:mod:`~harness.loadtest`), an emulated cluster of network namespaces with shaped links
(:mod:`~harness.netns`), a headless browser (:mod:`~harness.browser`) and the gallery
dataset its page is shown with (:mod:`~harness.gallery`).
"""
