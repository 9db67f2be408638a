#!/bin/bash
sed -i 's/a - b/a + b/' /app/thunder_utils.py
