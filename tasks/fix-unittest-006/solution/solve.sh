#!/bin/bash
sed -i 's/lower/upper/' /app/tundra_utils.py
