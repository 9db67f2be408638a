#!/bin/bash
sed -i 's/n - 1/n/' /app/thunder_tools.py
