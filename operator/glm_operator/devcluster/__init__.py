"""Developer cluster without a cluster: a local Kubernetes API emulator for ``make run`` and the e2e tests.

The emulator lives in :mod:`glm_operator.devcluster.emulator`; it needs the ``emulator`` extra
(``kmock``, ``jsonpatch``), so nothing is imported here.
"""
