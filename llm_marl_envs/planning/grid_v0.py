"""``planning/grid_v0``: a tool agent writes a solver program, a plan agent moves (AT-GRPO games).

Puzzles (``puzzle``), generated and solvable by construction, each a pure function of its
seed (``split="train"`` and ``"test"`` draw from disjoint seed ranges, as in AT-GRPO):
``"plan_path"`` (walk to the goal through walls, :mod:`.plan_path`), ``"sokoban"`` (push the
boxes onto the targets, :mod:`.sokoban`), ``"sudoku"`` (4x4, :mod:`.sudoku`). ``size`` sets
the grid (defaults 10, 6 and 4; Sudoku is always 4x4): the larger, the longer the horizon.

Roles, each turn in this order: ``tool`` (with ``tool=True``, the default) sees the state and
writes a Python program; it runs in the sandbox with the state on stdin and the plan agent
sees what it printed. ``plan`` answers ``<moves>U R R D</moves>``; the environment executes
the moves in order (an illegal move is skipped and counted; execution stops when solved)
and shows both agents the new state next turn. The episode ends when the puzzle is solved
or after ``max_turns``.

Reward: joint = 1.0 on the turn the puzzle is solved (so the return is 1 if solved, 0 if
not). Shaping, off by default: with ``shaping > 0`` each turn adds
``shaping * (phi_t - phi_{t-1})`` with ``phi = max(0, 1 - distance / initial_distance)``
(potential-based, ``distance`` = optimal moves left), so the return is
``solved + shaping * phi_final`` and ``return_range() == (low, 1 + shaping)``. Components:
``solved``, ``distance``, ``progress`` (phi), ``moves``, ``illegal_moves``, ``shaping``;
per agent: ``tool_ran``, ``tool_solves`` (its printed moves solve the puzzle from the
turn's state), ``plan_legal_fraction``, ``plan_progress`` (phi gained this turn).
:data:`LOCAL_REWARD_COMPONENTS` names each agent's local reward (AT-GRPO's r_local_i).

Format issues (``infos[agent]["format_issues"]``, penalized by ``format_penalty`` per flagged
agent and turn, 0 by default): a tool answer without code; plan words that are not moves,
no moves, more than ``max_moves_per_turn`` moves.

Counterfactual masking: not offered. Nothing is regenerated under "rescore", and the tool's
only influence is what the plan agent read, so masking it would change nothing (credit 0)
and masking the plan agent leaves nothing executed: the split says nothing useful.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from llm_marl_envs.code.sandbox_handle import SandboxResource
from llm_marl_envs.code.tool_runs import ToolRun, run_tool
from llm_marl_envs.core import Action, Role, TextCollabEnv, TurnOutcome, make_env_fn, make_parallel_env_fn
from llm_marl_envs.data.seed_splits import SPLITS, instance_seed
from llm_marl_envs.planning.grid_policies import best_policy, greedy_policy, random_policy
from llm_marl_envs.planning.plan_path import generate_plan_path
from llm_marl_envs.planning.prompts import plan_instructions, tool_instructions
from llm_marl_envs.planning.puzzle import Puzzle, parse_moves
from llm_marl_envs.planning.sokoban import generate_sokoban
from llm_marl_envs.planning.sudoku import generate_sudoku
from llm_marl_envs.sandbox import default_sandbox

__all__ = ["LOCAL_REWARD_COMPONENTS", "PUZZLES", "best_policy", "env", "greedy_policy", "parallel_env",
           "random_policy", "raw_env"]

PUZZLES = ("plan_path", "sokoban", "sudoku")
DEFAULT_SIZES = {"plan_path": 10, "sokoban": 6, "sudoku": 4}
SUDOKU_PIECES = ("r", "c", "=", "0", "1", "2", "3", "4")
#: the reward components that form each agent's local reward (AT-GRPO's r_local_i)
LOCAL_REWARD_COMPONENTS: dict[str, tuple[str, ...]] = {
    "tool": ("tool_ran", "tool_solves"),
    "plan": ("plan_progress",),
}


class raw_env(SandboxResource, TextCollabEnv):
    """Tool + plan agents solve a grid puzzle (see the module docstring).

    Args:
        puzzle: "plan_path", "sokoban" or "sudoku".
        size: grid size (None: 10 / 6 / 4); Sudoku only accepts 4.
        tool: include the ``tool`` role (else the plan agent plays alone).
        max_turns: turns per episode.
        max_moves_per_turn: moves executed per plan answer at most (None: 4 * size^2).
        shaping: weight of the potential-based progress shaping (0 = off).
        split: "train" or "test" (disjoint seed ranges).
        wall_density / n_boxes / inner_walls / n_holes: generator settings.
        sandbox / timeout_s: where and how long tool programs run.
        format_penalty: added to the joint reward once per flagged agent and turn; <= 0.
    """

    metadata = {"render_modes": ["ansi", "human"], "name": "grid_v0"}
    held_out_split = "test"  #: evaluation (``baselines.evaluate``) uses the disjoint test seeds
    local_reward_components = LOCAL_REWARD_COMPONENTS

    def __init__(
        self,
        puzzle: str = "plan_path",
        size: int | None = None,
        tool: bool = True,
        max_turns: int = 4,
        max_moves_per_turn: int | None = None,
        shaping: float = 0.0,
        split: str = "train",
        wall_density: float = 0.25,
        n_boxes: int = 1,
        inner_walls: int = 2,
        n_holes: int = 10,
        sandbox: Any = None,
        timeout_s: float | None = 5.0,
        format_penalty: float = 0.0,
        max_action_chars: int = 16_384,
        render_mode: str | None = None,
    ) -> None:
        if puzzle not in PUZZLES:
            raise ValueError(f"puzzle must be one of {PUZZLES}, got {puzzle!r}")
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        size = DEFAULT_SIZES[puzzle] if size is None else size
        if puzzle == "sudoku" and size != 4:
            raise ValueError(f"sudoku is 4x4 only, got size={size}")
        if shaping < 0 or format_penalty > 0:
            raise ValueError("shaping must be >= 0 and format_penalty <= 0")
        roles = [Role("plan", plan_instructions(puzzle, tool))]
        if tool:
            roles.insert(0, Role("tool", tool_instructions(puzzle)))
        super().__init__(roles, max_turns=max_turns, max_action_chars=max_action_chars,
                         format_penalty=format_penalty, render_mode=render_mode)
        self.kind, self.size, self.tool, self.split, self.shaping = puzzle, size, tool, split, shaping
        self.max_moves_per_turn = max_moves_per_turn or 4 * size * size
        self._generator_kwargs = {
            "plan_path": {"wall_density": wall_density},
            "sokoban": {"n_boxes": n_boxes, "inner_walls": inner_walls},
            "sudoku": {"n_holes": n_holes},
        }[puzzle]
        self._generate(np.random.default_rng(0))  # validates the generator settings now
        self.sandbox = sandbox if sandbox is not None else default_sandbox()
        self.timeout_s = timeout_s
        self.puzzle_seed = -1
        self.start: Puzzle = self.puzzle
        self.initial_distance = 1
        self.phi = 0.0
        self._turn: dict[str, Any] = {}

    def _generate(self, rng: np.random.Generator) -> None:
        kw = self._generator_kwargs
        if self.kind == "plan_path":
            self.puzzle: Puzzle = generate_plan_path(rng, self.size, **kw)
        elif self.kind == "sokoban":
            self.puzzle = generate_sokoban(rng, self.size, **kw)
        else:
            self.puzzle = generate_sudoku(rng, **kw)

    # ------------------------------------------------------------------ hooks
    def _setup(self, rng: np.random.Generator, options: dict) -> None:
        seed = options.get("puzzle_seed")
        self.puzzle_seed = instance_seed(rng, self.split) if seed is None else int(seed)
        self._generate(np.random.default_rng(self.puzzle_seed))
        self.start = self.puzzle
        self.initial_distance = max(int(self.puzzle.distance() or 1), 1)
        self.phi = 0.0

    def _begin_turn(self) -> None:
        self._turn = {"run": None, "tool_solves": False, "moves": [], "illegal": 0}
        state = self.puzzle.render()
        for agent in self.agents:
            self.tell(agent, f"Turn {self.turn + 1} of {self.max_turns}. Current state:\n{state}")

    def _on_action(self, agent: str, action: Action) -> None:
        if agent == "tool":
            run = run_tool(self.sandbox, action.text, self.puzzle.render() + "\n", self.timeout_s)
            if not run.code.strip():
                self.flag_format(agent, "no code found in the answer")
            self._turn["run"] = run
            self._turn["tool_solves"] = self._solves(run)
            self.tell("plan", run.render())
            return
        moves, issues = parse_moves(action.text, self.kind, self.max_moves_per_turn)
        for issue in issues:
            self.flag_format(agent, issue)
        executed, illegal = [], 0
        for move in moves:
            if self.puzzle.solved():
                break
            nxt = self.puzzle.apply(move)
            if nxt is None:
                illegal += 1
            else:
                self.puzzle = nxt
            executed.append(move)
        self._turn.update(moves=executed, illegal=illegal)

    def _solves(self, run: ToolRun) -> bool:
        moves, _ = parse_moves(run.stdout, self.kind, self.max_moves_per_turn)
        state: Puzzle | None = self.puzzle
        for move in moves:
            state = state.apply(move) if state is not None else None
        return bool(moves) and state is not None and state.solved()

    def _end_turn(self) -> TurnOutcome:
        t = self._turn
        solved = self.puzzle.solved()
        distance = 0 if solved else self.puzzle.distance()
        phi = 1.0 if solved else (0.0 if distance is None else max(0.0, 1.0 - distance / self.initial_distance))
        gained, self.phi = phi - self.phi, phi
        shaping = self.shaping * gained
        n_moves = len(t["moves"])
        components = {
            "solved": float(solved),
            "distance": float(-1 if distance is None else distance),
            "progress": phi,
            "moves": float(n_moves),
            "illegal_moves": float(t["illegal"]),
            "shaping": shaping,
        }
        agent_components = {"plan": {
            "plan_legal_fraction": (n_moves - t["illegal"]) / n_moves if n_moves else 0.0,
            "plan_progress": gained,
        }}
        if self.tool:
            run = t["run"]
            agent_components["tool"] = {"tool_ran": float(run is not None and run.ran),
                                        "tool_solves": float(t["tool_solves"])}
        last = solved or self.turn + 1 >= self.max_turns
        if not last:
            note = f"{n_moves} move(s) made, {t['illegal']} of them illegal (skipped)."
            if distance is None:
                note += " The puzzle can no longer be solved from here."
            for agent in self.agents:
                self.tell(agent, note)
        return TurnOutcome(float(solved) + shaping, components, agent_components, terminated=solved)

    # ------------------------------------------------------------------ extras
    def _hidden_state(self) -> str:
        return (f"puzzle: {self.kind} seed {self.puzzle_seed}; optimal solution from the start: "
                f"{self.start.solution()}\ncurrent state:\n{self.puzzle.render()}")

    def return_range(self) -> tuple[float, float]:
        return (self.format_penalty * len(self.possible_agents) * self.max_turns, 1.0 + self.shaping)

    def action_words(self, agent: str) -> tuple[str, ...] | None:
        """The plan agent's moves ``U D L R``, or the pieces Sudoku moves (``r2c3=4``) are
        spelled with, since tokenizers split them (``r 2 c 3 = 4``); the tool writes free text."""
        if agent == "tool":
            return None
        return SUDOKU_PIECES if self.kind == "sudoku" else self.puzzle.move_words()


env = make_env_fn(raw_env)
parallel_env = make_parallel_env_fn(raw_env)
