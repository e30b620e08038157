"""Which call never returned, when a test runs out of time.

At a timeout the innermost frame is whatever the endless loop happened to be calling at
that instant (a statistic it recomputes each round, a helper), not the loop. So shortly
before the limit the main thread's stack is sampled once; at the limit, the innermost frame
that is still the same frame object is the call that has been running all along.

The sample holds its frames alive (identity is what it compares), so it is taken only in
the last seconds before a test's limit, which no passing test reaches."""
import sys
import threading

LEAD_S = 1.5  # how long before the limit the stack is sampled (a third of a shorter limit)


class StackSample:
    """Samples the calling thread's stack `LEAD_S` seconds before `limit_s` have passed."""

    def __init__(self, limit_s):
        self._thread_id = threading.get_ident()
        self._frames = []
        self._timer = None
        if limit_s and limit_s > 0:
            self._timer = threading.Timer(limit_s - min(LEAD_S, limit_s / 3), self._take)
            self._timer.daemon = True
            self._timer.start()

    def _take(self):
        frame = sys._current_frames().get(self._thread_id)
        frames = []
        while frame is not None:
            frames.append(frame)
            frame = frame.f_back
        self._frames = frames

    def stop(self):
        if self._timer is not None:
            self._timer.cancel()

    def release(self):
        self.stop()
        self._frames = []

    def stuck_frame(self, tb):
        """The innermost frame of traceback `tb` that was already on the stack at the sample."""
        sampled = {id(f) for f in self._frames}
        stuck = None
        while tb is not None:
            if id(tb.tb_frame) in sampled:
                stuck = tb.tb_frame
            tb = tb.tb_next
        return stuck


def limit_of(item):
    """The test's time limit in seconds (pytest-timeout's marker, option or ini), or None."""
    marker = item.get_closest_marker("timeout")
    if marker is not None and marker.args:
        return float(marker.args[0])
    for value in (item.config.getoption("timeout", None), item.config.getini("timeout")):
        try:
            if value not in (None, ""):
                return float(value)
        except (TypeError, ValueError):
            pass
    return None
