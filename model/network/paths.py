"""The paths of a task graph's flows (:class:`PathTable`, a part of
:class:`fred.model.network.taskgraph.TaskGraph`): routes, multicast, reduction and in-switch
All-Reduce trees, numbered per graph in the order they are first asked for and cached by their
end points; their data (links, sources, destinations, latency after the last byte, per-flow rate
cap) is computed once per process for an equal topology and timing (:data:`_PATH_MEMO`)."""

from __future__ import annotations

import numpy as np

from fred import FredError

__all__ = ["PathTable", "MAX_PATH_LINKS"]

#: most links the distinct routes of one simulation hold together (~110 bytes each: a 512-NPU
#: ring all-to-all is 262,144 routes of 128 links on average, 3.8 GB)
MAX_PATH_LINKS = 10_000_000


#: path data (links, sources, destinations, latency, cap) by (topology fingerprint, timing), then
#: by path key: routed once per process, numbered per graph (:meth:`TaskGraph._path_memo`); the
#: oldest topology's dropped first beyond _PATH_MEMO_TOPOLOGIES
_PATH_MEMO: dict = {}
_PATH_MEMO_TOPOLOGIES = 16

#: topologies up to this many nodes look unicast paths up in a dense pair table (8 MB at most)
_PAIR_TABLE_NODES = 1024


class PathTable:
    """Path ids and their data; expects ``topo``, ``timing``, ``_sw_lat``, ``_eff`` and ``_check_room`` of the
    task graph it is part of."""

    def _init_paths(self):
        # by path id: links, sources, destinations, latency, per-flow rate cap
        self._p_links: list[np.ndarray] = []
        self._p_srcs: list[np.ndarray] = []
        self._p_dsts: list[np.ndarray] = []
        self._p_lat: list[float] = []
        self._p_cap: list[float] = []
        self._p_cache: dict = {}
        self._pair_pid = None                     # unicast path id by src x nodes + dst (-1: none yet)
        self._memo = None                         # the shared path data of this topology (_path_memo)

    def _path_memo(self) -> dict:
        """Path data by path key, shared by every graph on an equal topology with equal timing
        (routes, latencies and caps depend on nothing else): a path first met in this graph is
        numbered here as always, its routing done once per process (:data:`_PATH_MEMO`)."""
        memo = self._memo
        if memo is None:
            try:
                key = (self.topo.fingerprint(), self.timing)
                memo = _PATH_MEMO.get(key)
                if memo is None:
                    memo = _PATH_MEMO[key] = {}
                    while len(_PATH_MEMO) > _PATH_MEMO_TOPOLOGIES:
                        _PATH_MEMO.pop(next(iter(_PATH_MEMO)))
            except TypeError:                       # a timing that cannot be a key: this graph's own
                memo = {}
            self._memo = memo
        return memo

    def _known_path(self, key):
        """The id of the path ``key``: this graph's own, or added from the shared data if this
        graph has not met it yet; None if no graph has (the caller routes it and calls
        :meth:`_add_path`)."""
        pid = self._p_cache.get(key)
        if pid is not None:
            return pid
        d = self._path_memo().get(key)
        return None if d is None else self._add_path_data(key, d)

    def _add_path(self, key, links, srcs, lat, cap=np.inf, dsts=()):
        links = np.asarray(sorted(set(links)), dtype=np.int64)
        d = (links, np.asarray(srcs, dtype=np.int64), np.asarray(dsts, dtype=np.int64), float(lat), float(cap))
        for a in d[:3]:
            a.flags.writeable = False               # shared by the graphs of this topology
        self._path_memo()[key] = d
        return self._add_path_data(key, d)

    def _add_path_data(self, key, d):
        pid = len(self._p_lat)
        self._p_links.append(d[0])
        self._path_links = getattr(self, "_path_links", 0) + d[0].size
        if self._path_links > MAX_PATH_LINKS:
            raise FredError(f"this simulation's routes hold more than {MAX_PATH_LINKS:,} links, more than fit in "
                            f"memory (an all-to-all over many NPUs of a ring?); use fewer NPUs or a topology "
                            f"with shorter routes")
        self._p_srcs.append(d[1])
        self._p_dsts.append(d[2])
        self._p_lat.append(d[3])
        self._p_cap.append(d[4])
        self._p_cache[key] = pid
        return pid

    def path_links(self, pid: int) -> np.ndarray:
        """The link ids of path ``pid`` (sorted, each once)."""
        return self._p_links[pid]

    def path_latency(self, pid: int) -> float:
        """Seconds path ``pid`` adds after its last byte (its slowest source-destination route)."""
        return self._p_lat[pid]

    def _lat(self, src, dst, order=None) -> float:
        return self.topo.path_latency(src, dst, self.timing, order)

    def _tree_cap(self, links) -> float:
        """In-switch collective cap: link bandwidth x beats/cycle/port on links touching a switch."""
        b = self.timing.beats_per_cycle_per_port
        if b >= 1.0 or not links:
            return np.inf
        t = self.topo
        sw = t.is_switch
        ls = [l for l in links if sw[t.link_src[l]] or sw[t.link_dst[l]]]
        if not ls:
            return np.inf
        return float(b * t.link_bw[ls].min() * self._eff)

    def path_unicast(self, src, dst) -> int:
        key = ("u", src, dst)
        pid = self._known_path(key)
        if pid is None:
            pid = self._add_path(key, self.topo.path(src, dst), [src], self._lat(src, dst), dsts=[dst])
        return pid

    def paths_unicast(self, srcs, dsts) -> np.ndarray:
        srcs = np.asarray(srcs, dtype=np.int64).ravel()
        dsts = np.asarray(dsts, dtype=np.int64).ravel()
        self._check_room(srcs.size)               # each pair becomes a flow: refuse before routing
        if srcs.size == 0:
            return np.zeros(0, dtype=np.int64)
        # each distinct pair once, in the order of first appearance (new paths get their ids
        # in that order, as if the pairs were looked up one by one); pairs seen before come from
        # a table indexed by src x nodes + dst (a dict on very large topologies)
        n = self.topo.num_nodes
        key = srcs * n + dsts
        inside = min(srcs.min(), dsts.min()) >= 0 and max(srcs.max(), dsts.max()) < n
        if n <= _PAIR_TABLE_NODES and inside:       # (a node outside: the lookup one by one refuses it)
            if self._pair_pid is None or self._pair_pid.size != n * n:
                self._pair_pid = np.full(n * n, -1, dtype=np.int64)
            table = self._pair_pid
            pids = table[key]
            miss = pids < 0
            if miss.any():
                mk = key[miss]
                _, first = np.unique(mk, return_index=True)
                for k in mk[np.sort(first)].tolist():
                    table[k] = self.path_unicast(k // n, k % n)
                pids = table[key]
            return pids
        uniq, first, inv = np.unique(key, return_index=True, return_inverse=True)
        order = np.argsort(first, kind="stable")
        pids = np.empty(uniq.size, dtype=np.int64)
        for j, s, d in zip(order.tolist(), srcs[first[order]].tolist(), dsts[first[order]].tolist()):
            pids[j] = self.path_unicast(s, d)
        return pids[inv.ravel()]

    def path_multicast(self, src, dsts, order=None) -> int:
        """Path id of the multicast tree from ``src`` (union of its routes; ``order``: grid
        dimension order of those routes)."""
        dsts = tuple(sorted(set(int(d) for d in dsts) - {int(src)}))
        key = ("m", src, dsts, order)
        pid = self._known_path(key)
        if pid is None:
            links = set()
            for d in dsts:
                links.update(self.topo.path(src, d, order))
            lat = max((self._lat(src, d, order) for d in dsts), default=0.0)
            pid = self._add_path(key, links, [src], lat, self._tree_cap(links), dsts)
        return pid

    def path_reduce(self, srcs, dst, order=None) -> int:
        """Path id of the reduction tree into ``dst`` (union of the sources' routes)."""
        srcs = tuple(sorted(set(int(s) for s in srcs)))
        key = ("r", srcs, dst, order)
        pid = self._known_path(key)
        if pid is None:
            links = set()
            for s in srcs:
                if s != dst:
                    links.update(self.topo.path(s, dst, order))
            lat = max((self._lat(s, dst, order) for s in srcs if s != dst), default=0.0)
            pid = self._add_path(key, links, srcs, lat, self._tree_cap(links), [dst])
        return pid

    def path_allreduce(self, members, root) -> int:
        """One in-switch All-Reduce flow: reduce every member into switch ``root``, multicast back."""
        members = tuple(sorted(set(int(m) for m in members)))
        key = ("a", members, root)
        pid = self._known_path(key)
        if pid is None:
            links = set()
            up = down = 0.0
            for m in members:
                links.update(self.topo.path(m, root))
                links.update(self.topo.path(root, m))
                up = max(up, self._lat(m, root))
                down = max(down, self._lat(root, m))
            # a switch-rooted flow is a phase of its own: the switch first loads its configuration
            in_switch = self.topo.kinds[root] == "switch"
            lat = up + down + (self._sw_lat + self.timing.phase_switch_s if in_switch else 0.0)
            pid = self._add_path(key, links, members, lat, self._tree_cap(links), members)
        return pid
