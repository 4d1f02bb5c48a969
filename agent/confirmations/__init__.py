"""Cards: a write the model proposed, applied only when its user confirms.

``proposing`` turns a model's write into a waiting card, ``edits`` checks the fields its user
changed, and ``deciding`` confirms, cancels or expires it; what the rest of the app calls is named here.
"""

from .deciding import cancel, cancel_off_line, confirm, settle_lapsed
from .edits import editable_fields
from .proposing import propose

__all__ = ["cancel", "cancel_off_line", "confirm", "editable_fields", "propose", "settle_lapsed"]
