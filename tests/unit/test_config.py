"""The Gemini dummy-signature setting: off unless the operator opts in, by flag or variable, and it reaches the policy."""

from proxy.app import create_app
from proxy.config import Settings, load
from proxy.memory.inprocess import InProcessStore
from proxy.repair import Policy


def test_dummy_signatures_are_off_unless_opted_in() -> None:
    assert load({}, {}).dummy_signatures is False
    assert load({"dummy_signatures": True}, {}).dummy_signatures is True
    assert load({}, {"TOOLMEND_DUMMY_SIGNATURES": "true"}).dummy_signatures is True
    assert Policy().dummy_signatures is False


async def test_the_opt_in_reaches_the_repair_policy() -> None:
    app = create_app(Settings(dummy_signatures=True), store=InProcessStore(60, 10))
    async with app.router.lifespan_context(app):
        assert app.state.proxy.policy == Policy(dummy_signatures=True)
