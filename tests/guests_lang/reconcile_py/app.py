# reconcile_py: the Rust guest reconcile_mail in Python, with its own probe
# (`reconcile`): sends one email through `smtp`; asked about it after its answer was
# lost, looks for a message under the effect's key (`find`, a read).
from justonce import NOT_PERFORMED, PendingEffect, Performed, export, perform, tool


@tool
def reconcile_mail_py(to: str, subject: str) -> dict:
    """Sends one email to TO with SUBJECT."""
    sent = perform("smtp", "send", {"to": to, "subject": subject})
    return {"message_id": sent["message_id"], "then": f"told the caller about {sent['message_id']}"}


def reconcile(effect: PendingEffect):
    found = perform("smtp", "find", {"key": effect.key})
    if found is None:
        return NOT_PERFORMED
    return Performed({"message_id": found["message_id"]})


WitWorld = export(reconcile_mail_py, reconcile=reconcile)
