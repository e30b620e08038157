"""Fake clocks and workloads: the harness's logic tested exactly, never the machine's speed."""


class FakeClock:
    """Fake seconds that only fake workloads advance; counts its reads."""

    def __init__(self):
        self.now, self.reads = 0.0, 0

    def __call__(self):
        self.reads += 1
        return self.now


class FakeWork:
    """A workload that 'takes' durations[i] seconds of fake time on its i-th call (cycling)."""

    def __init__(self, clock, durations, name="fake"):
        self.clock, self.durations, self.calls, self.__name__ = clock, list(durations), 0, name

    def __call__(self):
        self.clock.now += self.durations[self.calls % len(self.durations)]
        self.calls += 1


class FakeMachine:
    """Workloads sharing one fake clock: the i-th call on the machine, by any workload, takes
    durations[i], so the order of the calls decides who gets which duration."""

    def __init__(self, durations):
        self.clock, self.durations, self.calls, self.log = FakeClock(), list(durations), 0, []

    def workload(self, name):
        def run():
            self.clock.now += self.durations[self.calls % len(self.durations)]
            self.calls += 1
            self.log.append(name)
        run.__name__ = name
        return run
