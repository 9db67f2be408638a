#!/bin/bash
sed -i 's/n - 1/n/' /app/birch_tools.py
