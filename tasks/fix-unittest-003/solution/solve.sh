#!/bin/bash
sed -i 's/n - 1/n/' /app/robin_tools.py
