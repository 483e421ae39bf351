"""What every benchmark prints first: the machine it ran on, and how busy it was."""
import os, platform
from pathlib import Path


def cpu_model():
    "The CPU's model name (Linux), else what platform knows."
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def load_average():
    "1-minute load average, or None where the platform has none."
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def describe(**versions):
    "One line: CPU, cores, OS, Python and the given library versions, and the load when measured."
    extra = "".join(f", {name} {v}" for name, v in versions.items())
    load = load_average()
    busy = "" if load is None else f"; load average {load:.2f} on {os.cpu_count()} cores" + \
        (" (other work was running)" if load > 0.5 else " (idle)")
    return (f"machine: {cpu_model()}, {os.cpu_count()} CPUs, {platform.system()} {platform.machine()}, "
            f"Python {platform.python_version()}{extra}{busy}")
