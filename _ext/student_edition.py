"""The student edition: every solution removed, gated ones included.

sphinx-exercise's own ``hide_solutions`` drops ``{solution}`` blocks but leaves the
end marker (and the executed code) of gated ``{solution-start}``/``{solution-end}``
solutions behind, which fails the build. Here solutions are removed after
sphinx-exercise has merged gated ones into ordinary solution nodes. Turned on by
``student_edition: true`` in the Sphinx config (``make book SOLUTIONS=hide``).
"""

from sphinx.transforms import SphinxTransform
from sphinx_exercise.nodes import solution_node


class RemoveSolutions(SphinxTransform):
    default_priority = 999  # after sphinx-exercise's MergeGatedSolutions

    def apply(self):
        if not self.config.student_edition:
            return
        for node in list(self.document.findall(solution_node)):
            node.parent.remove(node)


def setup(app):
    app.add_config_value("student_edition", False, "env")
    app.add_transform(RemoveSolutions)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
