"""A process that exits while the local model is still generating on another thread (a
gateway answering a client that left) ends cleanly: the model is not freed under the running
generation. Before, such a process crashed at exit with SIGSEGV (exit code 139) after its
records were written."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import threading, time
    from metaeval.models.registry import get_model
    from metaeval.models.types import Message, ModelRequest

    model = get_model("local/smollm2")
    def ask(text, tokens):
        request = ModelRequest(
            model="local/smollm2", messages=[Message(role="user", content=text)],
            max_tokens=tokens,
        )
        return model.complete(request)
    ask("hi", 2)  # loaded
    started = threading.Event()
    def generate():
        started.set()
        ask("Write a long story about a cat. " * 20, 80)
    threading.Thread(target=generate, daemon=True).start()
    started.wait()
    time.sleep(0.5)
    print("main exits", flush=True)
    """
)


@pytest.mark.local_model
def test_exiting_during_a_generation_does_not_crash():
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
        assert done.stdout.strip() == "main exits"


TEARDOWN_SCRIPT = textwrap.dedent(
    """
    import atexit

    def teardown_in_the_worst_order():
        # What interpreter teardown may do before a model's finaliser runs: llama_cpp's
        # module globals are gone. Registered first, so it runs after metaeval's exit hook.
        import llama_cpp._internals as internals
        internals.llama_cpp = None

    atexit.register(teardown_in_the_worst_order)
    from metaeval.models.registry import get_model
    from metaeval.models.types import Message, ModelRequest

    model = get_model("local/smollm2")
    request = ModelRequest(
        model="local/smollm2", messages=[Message(role="user", content="hi")], max_tokens=2
    )
    model.complete(request)
    print("done", flush=True)
    """
)


@pytest.mark.local_model
def test_a_loaded_model_is_freed_before_teardown_clears_its_library():
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    done = subprocess.run(
        [sys.executable, "-c", TEARDOWN_SCRIPT], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "done"
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "Exception ignored" not in done.stderr, done.stderr[-2000:]
