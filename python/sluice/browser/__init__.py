"""Real Chromium in the loop (``sluice browser run``): headless Chromium sends to headless
Chromium over WebRTC, every datagram through Sluice's trace relay, and the session is
recorded as the result files of a simulated run (scheme ``chrome``), so plots, tables and
reports treat a browser run as one more scheme.

* :mod:`.server`: the local HTTP server that serves the pages, signals, rewrites the ICE
  candidates to the relay and collects the pages' records;
* :mod:`.chromium`: starting and stopping headless Chromium;
* :mod:`.harness`: one session, and :func:`.harness.run`;
* :mod:`.records`: the pages' records as frame, skip and sample records and a summary;
* ``static/``: the sender and receiver pages.
"""
