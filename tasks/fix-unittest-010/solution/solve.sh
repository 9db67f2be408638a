#!/bin/bash
sed -i 's/a - b/a + b/' /app/plum_tools.py
