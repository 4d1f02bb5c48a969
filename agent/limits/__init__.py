"""Every cap a user or the site can reach, in one place: the per-minute quotas and stored bytes
(``quotas``), the rolling 24-hour cost caps (``costs``), a new turn's admission with the turn caps
and the off-purpose block (``admission``), and where a user stands against them, in words
(``caps``), each limit's standing one ``Standing``."""
