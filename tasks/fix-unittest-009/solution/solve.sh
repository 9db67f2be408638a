#!/bin/bash
sed -i 's/lower/upper/' /app/beacon_tools.py
