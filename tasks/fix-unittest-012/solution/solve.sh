#!/bin/bash
sed -i 's/n - 1/n/' /app/timber_lib.py
